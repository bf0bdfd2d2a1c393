"""README.md and docs/: the generated tables equal what `make docs` writes from docs/reference/ (a number edited by
hand fails), and thai_grpo_tools.reference's summaries, spread and comparison (the documents' commands:
tests/test_documented_commands.py)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from workflow import REPO

from thai_grpo_studies.large_k import large_k_results
from thai_grpo.evaluation.scoring import pairwise_tests, score_model
from thai_grpo_studies.seed_stats import seed_study
from thai_grpo.jobs.machine import cpu_label
from thai_grpo_tools import reference as ref
from thai_grpo_studies.hacking import hacking_results

SOURCE = {"command": "make run", "commit": "abc1234", "cpu": "Some CPU (AVX2)", "cores": 2, "date": "2026-01-01"}
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
REFERENCE = REPO / "docs" / "reference"


def load_reference() -> tuple[dict, dict]:
    assert (REFERENCE / "main.json").exists(), "docs/reference/main.json is missing: `make docs-reference` after `make run`"
    parts = {p: json.loads((REFERENCE / f"{p}.json").read_text()) for p in ref.PARTS if (REFERENCE / f"{p}.json").exists()}
    return parts, json.loads((REFERENCE / "elsewhere.json").read_text())


def records(counts: list[int], n: int, greedy: list[int]) -> list[dict]:
    """Sampled records as the sample rule writes them: c of n completions correct per problem."""
    def completion(right):
        return {"correct": 1.0 if right else 0.0, "num_tokens": 10, "truncated": False, "total": 1.0 if right else 0.0}
    return [{"completions": [completion(i < c) for i in range(n)], "greedy": {"correct": float(g)}}
            for c, g in zip(counts, greedy)]


@pytest.fixture(scope="module")
def results() -> dict:
    """A results.json in miniature, built by the pipeline's own scoring and pairwise tests."""
    rng = np.random.default_rng(0)
    rates = {"base": 0.1, "sft": 0.4, "grpo": 0.6}
    scores = {m: score_model(records(list(rng.binomial(8, p, size=30)), 8, list(rng.binomial(1, p, size=30))),
                             [1, 8], n_boot=500, seed=0) for m, p in rates.items()}
    steps = [{"step": i + 1, "accuracy": 0.1 * i, "kl": 0.01 * i} for i in range(6)]
    return {"eval": scores, "comparison": {"pairwise": pairwise_tests(scores, list(scores), n_boot=500, seed=0),
                                           "methods": [{"model": "grpo", "train_seconds": 73.2, "peak_memory_mb": 1500.0,
                                                        "trainable_parameters": 1000}]},
            "runs": {"grpo": {"steps": steps, "health": {"hacking_suspect": False, "truncation_failed": False}}},
            "run": {"benchmarks": {"train-grpo": 73.2}}}


def test_generated_tables_equal_what_make_docs_writes():
    parts, elsewhere = load_reference()
    tables = ref.render_tables(parts, elsewhere)
    stale = {path.name: ref.stale_tables(path.read_text(encoding="utf-8"), tables) for path in DOCS}
    assert not any(stale.values()), f"tables differ from `make docs` (edited by hand?): {stale}"
    used = {name for path in DOCS for name in ref.table_blocks(path.read_text(encoding="utf-8"))}
    assert {"headline", "costs", "chains", "spread"} <= used


def test_a_number_edited_by_hand_fails_the_check():
    parts, elsewhere = load_reference()
    tables = ref.render_tables(parts, elsewhere)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    body = ref.table_blocks(readme)["headline"]
    edited = re.sub(r"0\.(\d)(\d)(\d)", lambda m: f"0.{m[1]}{m[2]}{(int(m[3]) + 1) % 10}", body, count=1)
    assert edited != body
    assert ref.stale_tables(readme.replace(body, edited), tables) == ["headline"]
    assert ref.replace_tables(readme.replace(body, edited), tables) == readme


def test_markers_fill_empty_blocks_and_refuse_typos():
    filled = ref.replace_tables("a\n<!-- table:x -->\n<!-- /table:x -->\nb", {"x": "| 1 |"})
    assert filled == "a\n<!-- table:x -->\n| 1 |\n<!-- /table:x -->\nb"
    assert ref.table_blocks(filled) == {"x": "| 1 |"} and ref.replace_tables(filled, {"x": "| 1 |"}) == filled
    with pytest.raises(ValueError, match="no <!-- /table:x -->"):
        ref.table_blocks("<!-- table:x -->\n| 1 |\n<!-- /table:y -->")
    with pytest.raises(KeyError, match="no generated table named 'headlin'"):
        ref.replace_tables("<!-- table:headlin -->\n| 1 |\n<!-- /table:headlin -->", {"headline": "x"})


def test_summary_reads_the_scores_and_each_pair_either_way_round(results):
    summary = ref.summarise_main(results)
    sft = results["eval"]["sft"]
    assert summary["models"]["sft"]["pass@1"]["estimate"] == round(np.mean(sft["per_problem_correct"]) / 8, 4)
    assert summary["models"]["sft"]["pass@n"]["k"] == 8
    # stored as sft - base (a listed after b); the summary reads base - sft: the sign and the interval flip
    stored = next(t for t in results["comparison"]["pairwise"] if t["metric"] == "pass@1" and t["a"] == "sft"
                  and t["b"] == "base")
    base = summary["vs_sft"]["base"]["pass@1"]
    assert base["diff"] == round(-stored["mean_diff"], 4) < 0
    assert (base["low"], base["high"]) == (round(-stored["ci_high"], 4), round(-stored["ci_low"], 4))
    assert summary["vs_sft"]["grpo"]["pass@1"]["diff"] > 0
    assert summary["training"]["grpo"]["accuracy"] == [0.05, 0.45]  # means of steps 1-2 and 5-6


def test_headline_rows_read_as_model_minus_sft(results):
    summary = {"main": {"source": ref.source("main", "abc1234", "Some CPU", 2, 600.0, 900.0, "2026-01-01"),
                        **ref.summarise_main(results)}}
    table = ref.render_tables(summary, {})["headline"]
    assert table.startswith("`make run` at commit abc1234 on Some CPU, 2 cores, 2026-01-01:")
    base_row = next(line for line in table.splitlines() if line.startswith("| base"))
    assert f"{summary['main']['vs_sft']['base']['pass@1']['diff']:+.3f}" in base_row
    assert "Not in the reference run yet" in ref.render_tables(summary, {})["passk"]


def test_optional_targets_summaries_from_the_pipelines_own_documents():
    rng = np.random.default_rng(1)

    def scores(p, n=8, m=30):
        return score_model(records(list(rng.binomial(n, p, size=m)), n, list(rng.binomial(1, p, size=m))), [1, n],
                           n_boot=200, seed=0)

    runs = {m: [{"run": m, "seed": s, "scores": scores(p)} for s in (42, 1, 2)] for m, p in (("grpo", .5), ("ppo", .1))}
    seeds = ref.summarise_seeds({"training_seeds": [42, 1, 2], **seed_study(runs)})
    assert list(seeds["methods"]["grpo"]["per_seed"]) == ["42", "1", "2"]
    assert seeds["pairs"]["ppo - grpo"]["diff"] < 0
    passk = ref.summarise_passk(large_k_results({m: scores(p, 16, 20) for m, p in (("sft", .3), ("grpo", .5))}, 200, 0))
    assert set(passk["comparisons"]["grpo_vs_sft"]) >= {"k=1", "k=8", "k=16", "created", "lost", "k_reversed"}
    steps = [{"step": i + 1, "reward_mean": .4, "accuracy": .1, "empty_think_share": [0.2, 0.9, 0.1, 0.0][i],
              "blank_think_share": 0.0, "hollow_think_paid_share": 0.0, "clipped_ratio": .3} for i in range(4)]
    hacking = ref.summarise_hacking(hacking_results({"hack_lenient": {"steps": steps}},
                                                    {"hack_lenient": {"rewards": ["format_lenient"]}}, {}, {}))
    run = hacking["runs"]["hack_lenient"]
    assert (run["empty_peak"], run["empty_peak_step"]) == (0.9, 2)  # an episode in mid-run shows in the peak
    assert run["empty_think_share"] == {"start": 0.2, "last_third": 0.0}
    source = ref.source("main", "abc1234", "Some CPU", 2, None, None, "2026-01-01")
    parts = {p: {"source": source, **s} for p, s in (("seeds", seeds), ("passk", passk), ("hacking", hacking))}
    assert "| GRPO | " in ref.table_seeds(parts) and "PPO (reward model) - GRPO" in ref.table_seeds(parts)
    assert "k = 16" in ref.table_passk(parts) and "90% (step 2)" in ref.table_hacking(parts)


def test_the_loss_study_summary_keeps_each_variants_seeds_difference_and_verdict():
    from thai_grpo_studies.losses import loss_results

    rng = np.random.default_rng(2)

    def scores(p):
        return score_model(records(list(rng.binomial(8, p, size=40)), 8, list(rng.binomial(1, p, size=40))), [1, 8],
                           n_boot=200, seed=0)

    rates = {"grpo": .3, "no_kl": .3, "clip_higher": .8}
    runs = {v: [{"run": v if s == 42 else f"{v}-seed{s}", "seed": s, "scores": scores(p)} for s in (42, 1, 2)]
            for v, p in rates.items()}
    trains = {r["run"]: {"steps": [{"step": 1, "accuracy": .5}]} for rs in runs.values() for r in rs}
    plans = {"grpo": {"grpo_args": {"beta": 0.04}}, "no_kl": {"grpo_args": {"beta": 0.0}},
             "clip_higher": {"grpo_args": {"beta": 0.04, "epsilon_high": 0.28}}}
    seconds = {f"{kind}-{run}": 10.0 for kind in ("train", "sample", "score") for run in trains}
    study = loss_results(runs, trains, plans, seconds)
    losses = ref.summarise_losses(study)
    clip = losses["variants"]["clip_higher"]
    assert clip["changes"] == {"epsilon_high": [None, 0.28]} and clip["seconds"] == 90.0
    assert clip["per_seed"] == {str(r["seed"]): round(r["scores"]["pass@1"]["estimate"], 4)
                                for r in runs["clip_higher"]}
    assert losses["versus"]["pass@1"]["clip_higher"]["verdict"] == "higher"
    assert set(losses["versus"]) == {"pass@1", "pass@8", "greedy"} and set(losses["versus"]["pass@1"]) == {
        "no_kl", "clip_higher"}
    assert ref.study_job_seconds("losses", study) == 270.0
    table = ref.table_losses({"losses": {"source": ref.source("losses", "abc1234", "Some CPU", 2, None, 270.0,
                                                             "2026-01-01"), **losses}})
    assert "| `clip_higher` | `epsilon_high` None -> 0.28 |" in table and "| higher | none |" in table
    assert "pass@8 - grpo [simultaneous 95%]: verdict" in table


def test_a_study_costs_its_own_jobs_and_an_added_chain_is_what_the_chain_study_adds():
    chains = {"default_seed": 42, "cost": {"per_chain_seconds": {"42": 500.0, "1": 700.0, "2": 650.0}}}
    assert ref.study_job_seconds("chain_study", chains) == 1350.0
    assert ref.study_job_seconds("hacking", {"seconds": {"train-hack_strict": 30.0, "hacking_results": 1.0}}) == 31.0
    assert ref.study_job_seconds("main", {"cost": {"sum_seconds": 5.0}}) is None
    card = {"config": {"variants": {"grpo": {"group": "method"}, "g2": {"group": "pitfall"},
                                    "ppo_verifier": {"group": "ablation"}}},
            "run": {"benchmarks": {"train-grpo": 100.0, "train-g2": 40.0, "sample-g2": 9.0,
                                   "sample_own_temperature-ppo_verifier": 7.0, "figures-pitfalls": 3.0}}}
    assert ref.study_job_seconds("pitfalls", card) == 59.0
    source = ref.source("chain_study", "abc1234", "Some CPU", 2, None, 1350.0, "2026-01-01")
    main = {"source": {**SOURCE, "wall_seconds": 600.0}}
    costs = ref.table_costs({"main": main, "chain_study": {"source": source}}, {})
    assert "| `snakemake --cores 2 chains` | 22 min 30 s of jobs |" in costs and "| `make run` | 10 min 0 s |" in costs
    assert ref.fmt_seconds(7500) == "2 h 5 min"
    together = {"main": main, "seeds": {"source": {**source, "note": "run together"}},
                "chain_study": {"source": {**source, "note": "run together"}}}
    notes = ref.table_costs(together, {})
    assert notes.count("run together") == 1
    assert "*snakemake --cores 2 seeds, snakemake --cores 2 chains: run together*" in notes


def test_spread_is_the_range_over_chains_and_compare_checks_against_it():
    key = "main.models.sft.pass@1.estimate"
    chains = [{"values": {key: 0.344}}, {"values": {key: 0.321}}, {"values": {key: 0.388, "other": 1.0}}]
    spreads = ref.spread(chains)
    assert spreads == {key: {"chains": 3, "min": 0.321, "max": 0.388, "range": 0.067}}
    reference = {"main": {"source": {}, "models": {"sft": {"pass@1": {"estimate": 0.344, "low": 0.3}}},
                          "stage_seconds": {"train-grpo": 100.0}}}
    own = {"main": {"source": {}, "models": {"sft": {"pass@1": {"estimate": 0.42, "low": 0.3}}},
                    "stage_seconds": {"train-grpo": 190.0}}}
    rows = {r["key"]: r for r in ref.compare(reference, own, spreads)}
    assert rows[key]["difference"] == 0.076 and rows[key]["within"] is False
    assert rows["main.stage_seconds.train-grpo"]["ratio"] == 1.9
    assert "main.models.sft.pass@1.low" not in rows  # equal numbers are not listed
    near = {"main": {**own["main"], "models": {"sft": {"pass@1": {"estimate": 0.3, "low": 0.3}}}}}
    assert ref.compare(reference, near, spreads)[0]["within"] is True
    assert ref.compare(reference, reference, spreads) == []
    report = ref.compare_report(ref.compare(reference, own, spreads), {"main": {**reference["main"], "source": SOURCE}},
                                {"main": {**own["main"], "source": SOURCE}})
    assert "OUTSIDE the spread between 3 whole runs" in report and "x1.90" in report
    smaller = {"main": {**own["main"], "models": {"sft": {"problems": 8}}}}
    assert "another config" in ref.compare_report(ref.compare({"main": {"models": {"sft": {"problems": 200}}}},
                                                              smaller, {}), {}, {})


def test_cpu_named_by_model_and_vector_instructions():
    assert cpu_label("AMD EPYC", ["fpu", "avx2", "avx512f"]) == "AMD EPYC (AVX-512)"
    assert cpu_label("AMD EPYC", ["fpu", "avx2"]) == "AMD EPYC (AVX2)"


def test_wall_time_from_time_output_and_from_benchmark_files():
    assert ref.wall_from_time_output("\nreal\t11m52.500s\nuser\t20m1.0s\n") == 712.5
    assert ref.wall_from_time_output("1.0user 0.1system 0:11:52elapsed 99%CPU") == 712.0
    assert ref.wall_from_time_output("nothing") is None
    # jobs end at 100 (took 80: from 20) and at 150 (took 30: from 120): from 20 to 150
    assert ref.stage_span({"a": (100.0, 80.0), "b": (150.0, 30.0)}) == 130.0
    assert ref.target_stages("seeds", ["train-grpo", "train-grpo-seed1", "sample-rloo-seed2", "seed_results"]) == \
        ["sample-rloo-seed2", "seed_results", "train-grpo-seed1"]


def test_summary_keys_read_as_words():
    assert ref.pretty_key("main.models.sft.pass@1.estimate") == "SFT pass@1"
    assert ref.pretty_key("main.vs_sft.dr_grpo.pass@1.diff") == "Dr.GRPO - SFT, pass@1"
    assert ref.pretty_key("passk.comparisons.grpo_vs_sft.k=64.estimate") == "passk: GRPO - SFT at k = 64"
    assert ref.pretty_key("hacking.runs.hack_lenient.accuracy.last_third") == "hacking: hack_lenient accuracy, last third"


def test_k_ranges_read_as_spans():
    assert ref._ranges([3, 4, 5, 9, 11, 12]) == "3-5, 9, 11-12"
    assert ref._ranges([]) == "none"




# ---- no hand-written time: each comes from a generated table, or is the chapter's own ------------------------------

WRITTEN = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "config/README.md",
           REPO / "CONTRIBUTING.md", REPO / "config/config.yaml", REPO / "config/qwen3-0.6b.yaml", REPO / "Snakefile",
           *sorted((REPO / "rules").glob("*.smk"))]
A_TIME = re.compile(r"\b\d+(\.\d+)?\s?(min|minutes|s|seconds|h|hours)\b")
THE_CHAPTERS_TIMES = {  # what the chapter published (its T4 times), and a profile value; nothing measured here
    "docs/real-run.md": ["| `grpo` (full, the reported one) | 8 | 256 | 4 | ~18 min |",
                         "| `grpo_fast` | 4 | 192 | 2 | ~10 min |", "over the cluster's 60 s"],
    "config/qwen3-0.6b.yaml": ["~10 min on a T4 instead of ~18"],
    "rules/train.smk": ["GRPO takes the chapter ~18 min on a T4"],
}


def hand_written_times(name: str, text: str) -> list[str]:
    """The lines of ``text`` outside generated blocks that state a time, less the chapter's own."""
    text = ref.BLOCK.sub("", text)
    allowed = THE_CHAPTERS_TIMES.get(name, [])
    return [line.strip() for line in text.splitlines()
            if A_TIME.search(line) and not any(phrase in line for phrase in allowed)]


def test_no_time_is_written_by_hand_outside_the_generated_tables():
    names = {path.relative_to(REPO).as_posix(): path for path in WRITTEN}
    found = {name: hand_written_times(name, path.read_text(encoding="utf-8")) for name, path in names.items()}
    assert not any(found.values()), {name: lines for name, lines in found.items() if lines}
    assert hand_written_times("x.md", "A GRPO step took 2.75 s here.\n<!-- table:a -->\n1 min\n<!-- /table:a -->") \
        == ["A GRPO step took 2.75 s here."]


# ---- the findings' generated sentences say what the studies decided ---------------------------------------------

def _chain_scores(correct, n=8):
    correct = np.asarray(correct)
    rate = float(correct.sum() / (n * correct.size))
    return {"per_problem_correct": correct.tolist(), "n_samples": n, "num_problems": correct.size,
            "per_problem_greedy": (correct > n / 2).astype(int).tolist(),
            "pass@1": {"estimate": rate, "bootstrap_low": rate - 0.05, "bootstrap_high": rate + 0.05}}


def _studies():
    """Three chains of SFT, grpo (+0.3 in every chain) and rloo (+0.15, +0.15, -0.25: it flips with the chain), and a
    seed study of grpo and rloo on one chain; both summarised as `make docs-reference` does."""
    from thai_grpo_studies.chain_stats import chain_study

    rng = np.random.default_rng(7)
    p = rng.uniform(0.1, 0.5, size=200)
    chains = {"sft": [], "grpo": [], "rloo": []}
    for chain, shift in zip((42, 1, 2), (0.15, 0.15, -0.25)):
        base = np.clip(p + rng.normal(0, 0.05), 0, 1)
        for model, moved in (("sft", base), ("grpo", base + 0.3), ("rloo", base + shift)):
            chains[model].append({"seed": chain, "scores": _chain_scores(rng.binomial(8, np.clip(moved, 0, 1)))})
    study = chain_study(chains, n_boot=200, seed=0, metrics=("pass@1",))
    seeds = {m: [{"run": m, "seed": s, "scores": _chain_scores(rng.binomial(8, np.clip(p + lift + rng.normal(0, .01),
                                                                                     0, 1)))}
                 for s in (42, 1, 2)] for m, lift in (("grpo", 0.3), ("rloo", 0.1))}
    source = ref.source("chain_study", "abc1234", "Some CPU", 2, None, None, "2026-01-01")
    return {"chain_study": {"source": source, **ref.summarise_chain_study(study)},
            "seeds": {"source": source, **ref.summarise_seeds({"training_seeds": [42, 1, 2], **seed_study(seeds)})}}


def test_the_chain_verdicts_follow_the_plans_families_and_its_gate():
    parts = _studies()
    text = ref.table_chain_verdicts(parts)
    primary = parts["chain_study"]["pairs"]["grpo - sft"]
    assert primary["verdict"] == "higher" and primary["p_holm"] > 0
    assert f"**Primary comparison, GRPO - SFT** (primary comparison, tested alone at 5%): {ref.fmt_interval(primary, 'diff', True)}" in text
    assert "(3 of 3 above 0)" in text
    assert "- **Against SFT** (against SFT, Holm over the 1 pair at 5%, gated by the primary comparison): resolved 0 of 1." in text
    assert "  - RLOO - SFT: " in text and text.count("**not resolved**") == 1
    assert "- **Between methods**" in text and "none was tested: the family before it did not reject every pair." in text


def test_the_variance_table_sets_the_chains_spread_beside_the_seeds():
    parts = _studies()
    text = ref.table_variance_sources(parts)
    grpo_chains = np.std(list(parts["chain_study"]["models"]["grpo"]["pass1"].values()), ddof=1)
    grpo_seeds = parts["seeds"]["methods"]["grpo"]["sd"]
    assert f"| GRPO | {100 * grpo_chains:.1f} | {100 * grpo_seeds:.1f} |" in text
    assert f"GRPO {grpo_chains / grpo_seeds:.1f}x" in text and "| SFT | " in text and "| - | - |" in text
    assert ref.table_variance_sources({"chain_study": parts["chain_study"]}).startswith("*Not in the reference run yet")


RUN_NUMBER = re.compile(r"(?<![\w.])(?:[+-]\d+\.\d+|\d+\.\d{3,}|\d+(?:\.\d+)?%|\d+(?:\.\d+)?x(?![\w-]))")
PLAN_PERCENTS = {"5%"}  # the declared plan's level, not a result


def run_numbers(text: str) -> list[str]:
    """The result-like numbers of ``text`` outside its generated blocks: signed or 3-decimal numbers, shares in %
    (but the plan's level) and ratios like 5.5x."""
    return [m.group() for m in RUN_NUMBER.finditer(ref.BLOCK.sub("", text)) if m.group() not in PLAN_PERCENTS]


def test_findings_and_performance_hold_no_run_number_outside_the_generated_blocks():
    for name in ("docs/findings.md", "docs/performance.md"):
        assert run_numbers((REPO / name).read_text(encoding="utf-8")) == [], name
    assert run_numbers("GRPO gained +0.147 (0.482), 97% empty, 5.5x; at 5%.\n<!-- table:a -->\n+0.2\n<!-- /table:a -->") \
        == ["+0.147", "0.482", "97%", "5.5x"]


def test_the_reference_chain_studys_other_chains_join_the_spread():
    study = _studies()["chain_study"]
    study["default_seed"] = 42
    rows = ref.study_chains(study)
    assert [r["note"] for r in rows] == ["chain seed 1 of the reference chain study", "chain seed 2 of the reference chain study"]
    assert rows[0]["values"]["main.models.grpo.pass@1.estimate"] == study["models"]["grpo"]["pass1"]["1"]
    assert rows[1]["values"]["main.vs_sft.rloo.pass@1.diff"] == study["models"]["rloo"]["gain"]["2"]
    assert ref.study_chains(None) == []


def test_the_chain_table_lists_only_chains_with_pass1_values():
    parts, elsewhere = load_reference()
    kept = {**elsewhere, "chains": [*elsewhere["chains"], {"cpu": "Some CPU", "command": "snakemake --cores 2 passk",
                                                           "note": "passk only", "values": {"passk.x": 1.0}}]}
    table = ref.table_chains(parts, kept)
    assert "passk only" not in table and "the reference run" in table


def test_every_module_path_the_documents_cite_exists():
    """A dotted name such as `thai_grpo.jobs.job.end_job` in the README, CONTRIBUTING or docs/ names a module or an
    attribute that exists: a function moved or renamed leaves no stale pointer behind."""
    import importlib

    def resolves(name: str) -> bool:
        parts = name.split(".")
        for split in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            try:
                target = importlib.import_module(".".join(parts[:split]))
            except ModuleNotFoundError:
                continue
            for attribute in parts[split:]:
                target = getattr(target, attribute, None)
            return target is not None
        return False

    documents = [*DOCS, REPO / "CONTRIBUTING.md", REPO / "config" / "README.md"]
    cited = {(document.name, name) for document in documents
             for name in re.findall(r"\bthai_grpo(?:_studies|_tools)?(?:\.\w+)+", document.read_text())}
    assert cited and not [f"{document}: {name}" for document, name in sorted(cited) if not resolves(name)]
