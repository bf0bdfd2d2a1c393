"""Before and after the change of rule (thai_grpo_tools.rule_change) and the chain study's summary and table under the
plan (thai_grpo_tools.reference, reference_tables): from the published summaries and from a study's results.json."""

import json

import numpy as np
import pytest
from workflow import REPO

from thai_grpo_studies.chain_stats import chain_study
from thai_grpo.evaluation.plan import analysis_plan
from thai_grpo_tools import reference as ref
from thai_grpo_tools import reference_tables as rt
from thai_grpo_tools import rule_change as rc

PUBLISHED = REPO / "docs" / "reference"


def published():
    return (json.loads((PUBLISHED / "chain_study.json").read_text()),
            json.loads((PUBLISHED / "chain_study_main.json").read_text()))


def test_the_published_study_is_approximated_from_per_chain_values_and_one_chains_interval():
    chains, main = published()
    rows = {(t["a"], t["b"]): t for t in rc.published_rows(chains, main, analysis_plan(None))}
    assert len(rows) == len(chains["pairs"])
    primary = rows[("grpo", "sft")]
    per_chain = [chains["models"]["grpo"]["gain"][str(s)] for s in chains["seeds"]]
    assert primary["per_chain"] == pytest.approx(per_chain, abs=2e-4)
    se_problems = (main["vs_sft"]["grpo"]["pass@1"]["high"] - main["vs_sft"]["grpo"]["pass@1"]["low"]) / (2 * 1.959964)
    assert primary["se"] ** 2 == pytest.approx(np.var(per_chain, ddof=1) / 3 + se_problems ** 2, rel=1e-3)
    assert primary["family"] == "primary" and primary["previous"]["verdict"] == chains["pairs"]["grpo - sft"]["verdict"]
    assert all(t["family"] in ("primary", "vs_sft", "methods") for t in rows.values())
    assert rows[("ppo", "dpo")]["previous"]["verdict"] == chains["pairs"]["ppo - dpo"]["verdict"]


def test_the_table_prints_each_pair_before_and_after_and_each_familys_chain_count():
    chains, main = published()
    rows = rc.published_rows(chains, main, analysis_plan(None))
    table = rc.markdown_table(rows)
    assert table.splitlines()[0].startswith("| pair (pass@1) | difference (points) | crossed 95% interval | df |")
    assert len(table.splitlines()) == 2 + len(rows)
    needs = rc.family_needs(rows)
    assert set(needs) == {"primary", "vs_sft", "methods"} and needs["primary"]["pairs"] == 1
    assert rc.needs_text(needs, 0.8).startswith(f"primary: {needs['primary']['chains_needed']} chains to detect 10.0")


def _runs():
    rng = np.random.default_rng(2)
    p = rng.uniform(0.1, 0.5, size=40)
    runs = {"sft": [], "grpo": [], "rloo": []}
    for chain in (42, 1, 2):
        base = np.clip(p + rng.normal(0, 0.03), 0, 1)
        for model, lift in (("sft", 0.0), ("grpo", 0.25), ("rloo", 0.2)):
            counts = rng.binomial(8, np.clip(base + lift, 0, 1))
            rate = counts.sum() / (8 * counts.size)
            runs[model].append({"seed": chain, "scores": {
                "per_problem_correct": counts.tolist(), "n_samples": 8, "per_problem_greedy": (counts > 4).tolist(),
                "pass@1": {"estimate": rate, "bootstrap_low": rate - 0.05, "bootstrap_high": rate + 0.05}}})
    return runs


def test_a_study_results_file_gives_the_exact_rows_its_summary_and_its_table():
    study = chain_study(_runs(), n_boot=300, seed=0)
    rows = rc.study_rows(study)
    assert [(t["a"], t["b"]) for t in rows] == [("grpo", "sft"), ("rloo", "sft"), ("rloo", "grpo")]
    assert all("previous" in t and "power" in t for t in rows)
    summary = {"source": ref.source("chain_study", "abc1234", "Some CPU", 2, None, None, "2026-01-01"),
               **ref.summarise_chain_study(study)}
    pair = summary["pairs"]["grpo - sft"]
    assert pair["verdict"] == "higher" and pair["family"] == "primary" and pair["previous_verdict"]
    assert summary["models"]["grpo"]["gain_mean"]["df"] == pytest.approx(rows[0]["df"], abs=1e-4)
    table = rt.table_chain_study({"chain_study": summary})
    assert "| GRPO - SFT |" in table and "primary comparison, tested alone at 5%" in table
    assert "| higher |" in table and "Chains each family needs for 80% power" in table


def test_a_legacy_chain_summary_renders_as_it_was_until_it_is_regenerated():
    chains, _ = published()
    table = rt.table_chain_study({"chain_study": chains})
    assert "Holm p (paired t over chains)" in table and "| unresolved |" in table


def test_the_headline_table_of_a_run_under_the_plan_names_each_verdicts_family():
    from thai_grpo.evaluation.scoring import pairwise_tests

    scores = {m: {"per_problem_correct": c, "n_samples": 4, "per_problem_greedy": [int(x > 1) for x in c],
                  "num_problems": 6, "pass@1": {"estimate": sum(c) / 24, "bootstrap_low": 0, "bootstrap_high": 1,
                                                 "wilson_low": 0, "wilson_high": 1},
                  "pass@4": {"estimate": 0.5, "bootstrap_low": 0, "bootstrap_high": 1},
                  "greedy_accuracy": {"estimate": 0.5, "bootstrap_low": 0, "bootstrap_high": 1}}
              for m, c in (("sft", [0, 1, 2, 0, 1, 0]), ("grpo", [4, 4, 4, 4, 4, 4]))}
    results = {"eval": scores, "comparison": {"pairwise": pairwise_tests(scores, ["sft", "grpo"], n_boot=200),
                                              "methods": []}, "runs": {}, "run": {"benchmarks": {}}}
    summary = {"main": {"source": ref.source("main", "abc1234", "Some CPU", 2, 1.0, 1.0, "2026-01-01"),
                        **ref.summarise_main(results)}}
    test = summary["main"]["vs_sft"]["grpo"]["pass@1"]
    assert test["verdict"] == "higher" and test["family"] == "primary" and test["p_at_floor"]
    table = rt.table_headline(summary)
    assert "verdict (family; the declared plan)" in table.splitlines()[2]
    assert "| ≤ 0.0050 | higher (primary comparison) |" in table  # 1 / (200 + 1): the bootstrap's floor


def test_the_seed_studys_contrasts_print_before_and_after():
    from test_seeds import _fixture_study

    table = rc.contrast_table(_fixture_study()["pairs"])
    assert table.splitlines()[2].startswith("| rloo - grpo (pass@1) | -39.6 |")
    assert table.splitlines()[2].endswith("| lower | exceeds |")
