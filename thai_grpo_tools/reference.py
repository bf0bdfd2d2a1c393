"""`make docs`, `make docs-reference`, `make compare`: the numbers of README.md and docs/, generated so that they
cannot go stale, each step a pure function of JSON documents.

    python -m thai_grpo_tools.reference summarise   a run's results/ -> small summaries in docs/reference/*.json
                                                     (4 decimals), with the commit, command and CPU (docs-reference)
    python -m thai_grpo_tools.reference render      the tables between <!-- table:NAME --> markers of README.md and
                                                     docs/*.md, from the summaries (thai_grpo_tools.reference_tables)
    python -m thai_grpo_tools.reference check       exit 1 naming every table that differs from what render writes
    python -m thai_grpo_tools.reference compare     your results/ against the summaries: which numbers differ, by how
                                                     much, within the spread seen between whole runs (``spread``)?
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
from pathlib import Path

import numpy as np

from thai_grpo.core.io import atomic_write_text, read_json, read_jsonl, write_json
from thai_grpo.jobs.machine import commit_of, this_cpu
from thai_grpo.report.plan_words import family_text
from thai_grpo.report.verdicts import oriented
from thai_grpo_studies.hacking_words import hacking_outcome

REPO = Path(__file__).resolve().parents[1]
#: The parts of a run a summary is made of: results file under results/, and the command that builds it.
PARTS = {"main": ("results.json", "make run"),
         "passk": ("passk/results.json", "snakemake --cores 2 passk"),
         "seeds": ("seeds/results.json", "snakemake --cores 2 seeds"),
         "hacking": ("hacking/results.json", "snakemake --cores 2 hacking"),
         "pitfalls": ("pitfalls/results.json", "snakemake --cores 2 pitfalls"),
         "losses": ("losses/results.json", "snakemake --cores 2 losses"),
         "chain_study": ("chains/results.json", "snakemake --cores 2 chains"),
         "bench": ("bench/bench.json", "make bench")}
#: The benchmark files (results/benchmarks/STEM.tsv) whose jobs each optional target runs, by stem prefix.
TARGET_STAGES = {"passk": ("sample_passk-", "score_passk-"), "hacking": ("sft_adapter_brief", "train-hack_"),
                 "seeds": ("seed_results",), "losses": ("loss_results", "loss_report"), "pitfalls": ("figures-pitfalls",),
                 "chain_study": ("chain_results",)}
HACKING_CURVES = ("reward_mean", "accuracy", "empty_think_share", "blank_think_share", "hollow_think_paid_share",
                  "clipped_ratio")
REWARD_PARTS = ("correct", "format", "thai", "total")
DIGITS = 4


def _r(value):
    """A number rounded to DIGITS decimals (ints and None unchanged)."""
    return round(float(value), DIGITS) if isinstance(value, float) else value


def _p(value):
    """A p-value to two significant figures: a p far below 0.0001 stays above 0 (rounding decimals would make it 0)."""
    return float(f"{value:.2g}") if isinstance(value, float) else value


def _interval(record: dict, estimate="estimate", low="bootstrap_low", high="bootstrap_high") -> dict:
    return {"estimate": _r(record[estimate]), "low": _r(record[low]), "high": _r(record[high])}


def _diff(test: dict) -> dict:
    """A test's difference and its interval, in 4 decimals."""
    return {"diff": _r(test["mean_diff"]), "low": _r(test["ci_low"]), "high": _r(test["ci_high"])}


def _test(test: dict, flip: bool = False) -> dict:
    """One pairwise test, read the other way round when ``flip`` (its verdict turned with the pair)."""
    turned = oriented(test, test["b"]) if flip else test
    return {**_diff(turned), "p": _p(test["p_value"]), "n_resamples": test.get("n_resamples"),
            "p_holm": _p(test["p_holm"]), "p_at_floor": bool(test.get("p_at_floor")), "verdict": turned["verdict"],
            "family": test["family"], "family_text": family_text(test)}


def pair_test(pairwise: list[dict], a: str, b: str, metric: str) -> dict | None:
    """The Holm-family test of ``a - b`` on ``metric`` from ``comparison.pairwise``, whichever way round it was stored."""
    for test in pairwise:
        if test["metric"] == metric and {test["a"], test["b"]} == {a, b}:
            return _test(test, flip=test["a"] != a)
    return None


def _thirds(values: list) -> list:
    values = np.array([np.nan if v is None else v for v in values], dtype=float)
    window = max(1, values.size // 3)
    return [_r(float(np.nanmean(p))) if np.isfinite(p).any() else None for p in (values[:window], values[-window:])]


def summarise_scores(results: dict) -> dict:
    """Per model: pass@1 (bootstrap and Wilson intervals), pass@n and greedy accuracy; per trained model its pass@1
    and greedy difference from SFT (``pair_test``); every other pair."""
    pairwise = results["comparison"]["pairwise"]
    models = {}
    for name, scores in results["eval"].items():
        largest = max((key for key in scores if re.fullmatch(r"pass@\d+", key)), key=lambda key: int(key[5:]))
        models[name] = {"pass@1": {**_interval(scores["pass@1"]), "wilson_low": _r(scores["pass@1"]["wilson_low"]),
                                   "wilson_high": _r(scores["pass@1"]["wilson_high"])},
                        "pass@n": {**_interval(scores[largest]), "k": int(largest[5:])},
                        "greedy": _interval(scores["greedy_accuracy"]),
                        "problems": scores["num_problems"], "samples": scores["n_samples"]}
    names = list(results["eval"])
    vs_sft = {m: {metric: pair_test(pairwise, m, "sft", metric) for metric in ("pass@1", "greedy")}
              for m in names if m != "sft" and "sft" in names}
    pairs = {f"{a} - {b}": {metric: pair_test(pairwise, a, b, metric) for metric in ("pass@1", "greedy")}
             for i, b in enumerate(names) for a in names[i + 1:] if "sft" not in (a, b)}
    return {"models": models, "vs_sft": vs_sft, "pairs": pairs}


def summarise_main(results: dict) -> dict:
    """The main run: scores and tests, each trained run's rollout accuracy and KL (first -> last third of its steps)
    and health flags, the k1/k3 study on real tokens, PPO's reward model, each method's training cost."""
    runs = {name: {"accuracy": _thirds([s.get("accuracy") for s in run["steps"]]),
                   "kl": _thirds([s.get("kl") for s in run["steps"]]),
                   "steps": len(run["steps"]), "flagged": bool(run["health"]["hacking_suspect"]
                                                               or run["health"]["truncation_failed"])}
            for name, run in results.get("runs", {}).items()}
    kl = ((results.get("kl_real") or {}).get("summary")) or None
    if kl:
        kl = {"tokens": kl["tokens"], "completions": kl["completions"], "problems": kl.get("problems"),
              "interval_unit": kl.get("interval_unit", "completions"),
              **{name: {"mean": _r(kl["means"][name]["mean"]), "low": _r(kl["means"][name]["low"]),
                        "high": _r(kl["means"][name]["high"]), "bootstrap_se": _r(kl["means"][name].get("se"))}
                 for name in ("exact", "k1", "k3", "k1_minus_exact", "k3_minus_exact")},
              "exact_se_k1": _r(kl["exact_se"]["k1"]), "exact_se_k3": _r(kl["exact_se"]["k3"]),
              "share_k3_lower_variance": _r(kl["share_k3_lower_variance"])}
    reward_model = results.get("reward_model") or {}
    rm = {part: {"accuracy": _r((reward_model.get(part) or {}).get("accuracy")),
                 "pairs": (reward_model.get(part) or {}).get("pairs")} for part in ("train", "heldout")} \
        if reward_model.get("train") else None
    costs = {row["model"]: {"train_seconds": _r(row.get("train_seconds")), "peak_memory_mb": _r(row.get("peak_memory_mb")),
                            "trainable_parameters": row.get("trainable_parameters")}
             for row in results["comparison"]["methods"] if row.get("model")}
    return {**summarise_scores(results), "training": runs, "kl_real": kl, "reward_model": rm, "method_costs": costs,
            "stage_seconds": {stage: _r(results["run"]["benchmarks"][stage]) for stage in main_stages(results)},
            "chapter_departures": results["run"].get("chapter_departures")}


def summarise_passk(passk: dict) -> dict:
    """pass@k to k = n: each model at k = 1, 8 and n, and per pair the difference at those k, where its verdict
    changes (``thai_grpo_studies.large_k.crossing``) and the problems created and lost."""
    n = passk["n_samples"]
    ks = [k for k in (1, 8, n) if k <= n]

    def at(band: dict, k: int) -> dict:
        return {"estimate": _r(band["mean"][k - 1]), "low": _r(band["low"][k - 1]), "high": _r(band["high"][k - 1])}

    comparisons = {}
    for name, c in passk["comparisons"].items():
        crossing = c["crossing"]
        comparisons[name] = {**{f"k={k}": at(c["difference"], k) for k in ks},
                             **{key: crossing[key] for key in ("first_k_includes_zero", "first_k_reversed",
                                                               "first_k_sign_flip", "includes_zero_at_n")},
                             "k_reversed": _ranges(crossing["k_reversed"]),
                             **{key: c[key] for key in ("created", "lost", "both", "neither")}}
    return {"n": n, "problems": passk["num_problems"],
            "models": {m: {f"k={k}": at(band, k) for k in ks} for m, band in passk["curves"].items()},
            "comparisons": comparisons}


def _ranges(ks: list[int]) -> str:
    """[3, 4, 5, 9] -> '3-5, 9'; [] -> 'none'."""
    spans, start = [], None
    for i, k in enumerate(ks):
        start = k if start is None else start
        if i + 1 == len(ks) or ks[i + 1] != k + 1:
            spans.append(f"{start}" if start == k else f"{start}-{k}")
            start = None
    return ", ".join(spans) or "none"


def _seed_power(power: dict) -> dict:
    return {key: _r(power.get(key)) for key in ("effect", "alpha", "power_now", "seeds_needed", "seeds")}


def summarise_seeds(seeds: dict) -> dict:
    """The seed study: per method pass@1 per training seed, the between-seed mean, t interval and SD, the
    re-sampling SD, the within-run SE and the crossed interval; per contrast against the baseline the difference, its
    simultaneous interval, Dunnett p and verdict; the seeds the family needs."""
    methods = {m: {"per_seed": {str(r["seed"]): _r(r["estimate"]) for r in s["runs"]},
                   "mean": _r(s["between_seed"]["mean"]), "t_low": _r(s["between_seed"]["t_low"]),
                   "t_high": _r(s["between_seed"]["t_high"]), "sd": _r(s["between_seed"]["sd"]),
                   "crossed_low": _r(s["crossed"]["low"]), "crossed_high": _r(s["crossed"]["high"]),
                   "resampling_sd": _r(s["resampling_sd"]), "within_run_se": _r(s["within_run_se"])}
               for m, s in seeds["methods"].items()}
    pairs = {f"{p['a']} - {p['b']}": {**_diff(p), "p": _p(p["p_value"]), "p_holm": _p(p["p_holm"]), "df": _r(p["df"]),
                                      "verdict": p["verdict"], "family_text": family_text(p)}
             for p in seeds["pairs"]}
    return {"seeds": seeds["training_seeds"], "methods": methods, "pairs": pairs,
            "power": _seed_power(seeds.get("power") or {})}


def summarise_hacking(hacking: dict) -> dict:
    """The reward-hacking runs: per run each curve at step 1 and over the last third, the empty-think peak and its
    step (an episode in mid-run shows there, not in the last third), and the flag."""
    runs = {}
    for name, run in hacking["runs"].items():
        empty = [s.get("empty_think_share") for s in run["steps"]]
        peak = max(range(len(empty)), key=lambda i: -1 if empty[i] is None else empty[i]) if empty else None
        runs[name] = {"format_reward": run["format_reward"], "steps": len(run["steps"]),
                      **{key: {"start": _r(run["means"][key]["start"]), "last_third": _r(run["means"][key]["last_third"])}
                         for key in HACKING_CURVES if key in run["means"]},
                      "empty_peak": _r(empty[peak]) if peak is not None else None,
                      "empty_peak_step": run["steps"][peak]["step"] if peak is not None else None,
                      "flagged": bool(run["health"]["hacking_suspect"]),
                      "outcome": hacking_outcome(run), "rates": run.get("rates")}
    return {"runs": runs, "title": hacking.get("title")}


def summarise_chain_study(study: dict) -> dict:
    """The chain study: per model pass@1 per chain and, for the methods, the gain over the chain's SFT and its mean
    with the crossed interval; per pair of pass@1 the difference, crossed interval, df, adjusted p, family and
    verdict; per family the chains it needs; the sampling seeds and the hacking runs per variant."""
    models = {}
    for model, entry in study["models"].items():
        row = {"pass1": {str(c["seed"]): _r(c["pass@1"]["estimate"]) for c in entry["chains"]}}
        if "gain_over_sft" in entry:
            gain = entry["gain_over_sft"]
            row["gain"] = {str(c["seed"]): _r(c["gain_over_sft"]["estimate"]) for c in entry["chains"]}
            row["gain_mean"] = {"diff": _r(gain["mean"]), "low": _r(gain["low"]), "high": _r(gain["high"]),
                                "df": _r(gain["df"])}
        models[model] = row
    pairs = {f"{p['a']} - {p['b']}": {**_diff(p), "df": _r(p["df"]), "p": _p(p["p_value"]), "p_holm": _p(p["p_holm"]),
                                      "p_at_floor": bool(p.get("p_at_floor")), "verdict": p["verdict"],
                                      "family": p["family"], "family_text": family_text(p)}
             for p in study["pairs"]["pass@1"]}
    power = {family: {"effect": _r(f["effect"]), "alpha": _r(f["alpha"]), "chains_needed": f["chains_needed"]}
             for family, f in ((study.get("power") or {}).get("families") or {}).items()}
    hacking = {name: v["sentence"] for name, v in ((study.get("hacking") or {}).get("variants") or {}).items()}
    return {"seeds": study["seeds"], "default_seed": study.get("default_seed"), "n_resamples": study["n_resamples"],
            "models": models, "pairs": pairs, "power": power, "sampling_seeds": study.get("sampling_seeds"),
            "hacking": hacking}


def summarise_losses(losses: dict) -> dict:
    """The loss-family study: per variant what it changes, its first metric per training seed, the between-seed mean
    with the crossed interval, its flagged runs and its jobs' seconds; per metric each variant against the baseline
    (difference, simultaneous interval, Dunnett p, verdict); the seeds the confirmatory family needs."""
    metric = losses["metrics"][0]
    variants = {}
    for name, variant in losses["variants"].items():
        first = variant["metrics"][metric]
        variants[name] = {"changes": variant.get("changes") or {},
                          "per_seed": {str(run["seed"]): _r(value) for run, value in
                                       zip(variant["runs"], first["per_seed"])},
                          "mean": _r(first["between_seed"]["mean"]), "crossed_low": _r(first["crossed"]["low"]),
                          "crossed_high": _r(first["crossed"]["high"]), "flagged": variant.get("flagged") or [],
                          "seconds": _r(variant["cost"]["sum_seconds"])}
    versus = {m: {t["variant"]: {**_diff(t), "p_holm": _p(t["p_holm"]), "verdict": t["verdict"],
                                 "family_text": family_text(t)} for t in tests} for m, tests in losses["versus"].items()}
    return {"baseline": losses["baseline"], "seeds": losses["training_seeds"], "metric": metric,
            "metrics": losses["metrics"], "problems": losses["num_problems"], "samples": losses["n_samples"],
            "variants": variants, "versus": versus, "power": _seed_power(losses.get("power") or {})}


def summarise_pitfalls(results: dict) -> dict:
    """The pitfalls report's run: its models' scores and tests against SFT."""
    scores = summarise_scores(results)
    return {"models": scores["models"], "vs_sft": scores["vs_sft"]}


def example_problem(samples: dict[str, list[dict]], before: str = "sft", after: str = "grpo") -> dict | None:
    """One held-out problem with each model's greedy answer and reward breakdown: the first that ``after`` answers
    right and ``before`` wrong, else the first ``after`` answers right (``samples``: each model's samples.jsonl)."""
    if before not in samples or after not in samples:
        return None
    pairs = list(zip(samples[before], samples[after]))
    chosen = next((b for b, a in pairs if a["greedy"]["correct"] and not b["greedy"]["correct"]), None) or \
        next((b for b, a in pairs if a["greedy"]["correct"]), None)
    if chosen is None:
        return None
    index = [b["id"] for b, _ in pairs].index(chosen["id"])
    return {"id": chosen["id"], "index": index, "question": chosen["question"], "gold": chosen["gold"],
            "greedy": {model: {"text": records[index]["greedy"]["text"],
                               **{part: records[index]["greedy"][part] for part in REWARD_PARTS}}
                       for model, records in ((before, samples[before]), (after, samples[after]))}}


def summarise_bench(bench: dict) -> dict:
    """`make bench`: each method's step and held-out sampling split into parts (seconds, at the threads the pipeline
    gives each), and the last run projected onto other CPUs."""
    def split(record: dict) -> dict:
        return {"threads": record.get("threads"), "seconds": {k: _r(v) for k, v in record["seconds"].items()}}

    def threads(record: dict) -> str:
        return f"{record['threads']} thread{'s' if record['threads'] > 1 else ''}"

    steps = {f"GRPO ({threads(record)})": split(record) for record in bench.get("grpo_step", [])}
    steps.update({name: split(bench[key]) for key, name in (("dr_grpo_step", "Dr.GRPO"), ("ppo_step", "PPO"),
                                                            ("dpo_step", "DPO")) if bench.get(key)})
    steps.update({f"held-out sampling, {record['problems']} problems ({threads(record)})": split(record)
                  for record in bench.get("heldout_sampling", [])})
    return {"cpu": bench.get("cpu"), "steps": steps,
            "other_cpus": [{k: _r(v) if isinstance(v, float) else v for k, v in row.items()}
                           for row in bench.get("other_cpus", [])]}


SUMMARISERS = {"main": summarise_main, "passk": summarise_passk, "seeds": summarise_seeds,
               "hacking": summarise_hacking, "losses": summarise_losses, "pitfalls": summarise_pitfalls,
               "chain_study": summarise_chain_study, "bench": summarise_bench}


# ----------------------------------------------------------------------------------------- where a summary came from
def stage_span(stages: dict[str, tuple[float, float]]) -> float | None:
    """Wall seconds from the first job's start to the last job's end; ``stages``: {stem: (end time, seconds)}."""
    if not stages:
        return None
    return max(end for end, _ in stages.values()) - min(end - s for end, s in stages.values())


def target_stages(part: str, stems: list[str]) -> list[str]:
    """The benchmark stems of an optional target's jobs (``TARGET_STAGES``); for seeds also the retrained runs'
    train, sample and score jobs (``<variant>-seed<N>``)."""
    chosen = [s for s in stems if s.startswith(TARGET_STAGES.get(part, ()))]
    if part == "seeds":
        chosen += [s for s in stems if re.fullmatch(r"(train|sample|score)-.+-seed\d+", s)]
    return sorted(set(chosen))


def study_job_seconds(part: str, data: dict) -> float | None:
    """The seconds of a study's own jobs, summed, as its results record them (None where they do not): what the
    study costs a run that already has the main run's models."""
    cost = data.get("cost") or {}
    if part in ("seeds", "losses"):
        return cost.get("sum_seconds")
    if part == "chain_study":
        added = {seed: s for seed, s in (cost.get("per_chain_seconds") or {}).items()
                 if str(seed) != str(data.get("default_seed"))}
        return sum(added.values()) if added else None
    if part == "hacking":
        return sum(data["seconds"].values()) if data.get("seconds") else None
    if part == "passk":
        return sum(data["benchmarks"].values()) if data.get("benchmarks") else None
    if part == "pitfalls":  # the pitfall and ablation variants' own jobs (the methods' are the main run's)
        variants = data.get("config", {}).get("variants") or {}
        own = {name for name, v in variants.items() if v.get("group") in ("pitfall", "ablation")}
        seconds = [s for stem, s in data["run"]["benchmarks"].items()
                   if stem.split("-", 1)[-1] in own or stem.startswith(TARGET_STAGES["pitfalls"])]
        return sum(seconds) if seconds else None
    return None


def main_stages(results: dict) -> list[str]:
    """The main run's benchmark stems, without an optional target's jobs that ran before it (same folder)."""
    optional = tuple(prefix for prefixes in TARGET_STAGES.values() for prefix in prefixes)
    return [stem for stem in results["run"]["benchmarks"] if not stem.startswith(optional)]


def source(part: str, commit: str, cpu: str, cores: int, wall_seconds: float | None, jobs_seconds: float | None,
           date: str, note: str | None = None) -> dict:
    """Where a summary came from: command, commit, CPU, cores, date, wall time (``time`` or the jobs' span) and the
    sum of its jobs' seconds (None: not measured), and a note on how it was run."""
    return {"command": PARTS[part][1], "results": f"results/{PARTS[part][0]}", "commit": commit, "cpu": cpu,
            "cores": cores, "wall_seconds": _r(wall_seconds), "jobs_seconds": _r(jobs_seconds), "date": date,
            "note": note}


def wall_from_time_output(text: str) -> float | None:
    """Wall seconds from bash's ``time`` (``real 11m52.123s``) or GNU time (``0:11:52elapsed``, ``11:52.12elapsed``,
    ``Elapsed (wall clock) time ...: 11:52.12``); None when neither is there."""
    match = re.search(r"real\s+(?:(\d+)h)?(\d+)m([\d.]+)s", text)
    if match:
        hours, minutes, seconds = match.groups()
        return int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)
    match = re.search(r"(?:([\d:.]+)elapsed|Elapsed \(wall clock\) time[^:]*:\s*([\d:.]+))", text)
    if match:
        parts = [float(p) for p in (match.group(1) or match.group(2)).split(":")]
        return sum(value * 60 ** power for power, value in enumerate(reversed(parts)))
    return None


def summaries(results: Path, time_file: Path | None, untimed: list[str] = (), notes: dict | None = None,
              walls: dict | None = None) -> dict:
    """{part: summary with its source} for every part whose results file exists under ``results``; ``untimed`` parts
    get no wall or job time (a run interrupted and resumed), ``notes`` a note each, ``walls`` a measured wall time
    each. A study whose results record its own jobs gets their seconds, and no wall time unless given."""
    if not (results / "results.json").exists():
        sys.exit(f"no {results / 'results.json'}: run `make run` first (or pass --results DIR)")
    from thai_grpo_tools.speedup import read_benchmarks

    commit, cpu, cores = commit_of(results.parent), this_cpu(), len(os.sched_getaffinity(0))
    timed = {stem: ((results / "benchmarks" / f"{stem}.tsv").stat().st_mtime, s)
             for stem, s in read_benchmarks(results / "benchmarks").items()}
    out = {}
    for part, (path, _) in PARTS.items():
        if not (results / path).exists():
            continue
        data = read_json(results / path)
        stems = main_stages(data) if part == "main" else target_stages(part, list(timed))
        stages = {s: timed[s] for s in stems if s in timed}
        wall = stage_span(stages)
        if part == "main" and time_file:
            wall = wall_from_time_output(time_file.read_text()) or wall
        jobs = sum(s for _, s in stages.values()) or None
        own = study_job_seconds(part, data)
        if own is not None:  # its jobs may have run beside other targets': their span is not its wall time
            wall, jobs = None, own
        wall = (walls or {}).get(part, wall)
        if part in untimed:
            wall = jobs = None
        date = datetime.datetime.fromtimestamp((results / path).stat().st_mtime, datetime.timezone.utc)
        out[part] = {"source": source(part, commit, cpu, cores, wall, jobs, date.strftime("%Y-%m-%d"),
                                      (notes or {}).get(part)), **SUMMARISERS[part](data)}
        if part == "main":  # one held-out problem with SFT's and GRPO's answers, for README
            samples = {m: read_jsonl(results / f"eval/{m}/samples.jsonl") for m in ("sft", "grpo")
                       if (results / f"eval/{m}/samples.jsonl").exists()}
            out[part]["example"] = example_problem(samples)
            headline = results / "headline.json"  # seconds from the first job's start to it
            out[part]["source"]["headline_seconds"] = round(headline.stat().st_mtime - min(
                end - s for end, s in stages.values())) if headline.exists() and part not in untimed and stages else None
    return out


# ----------------------------------------------------------------------------------------- comparing with the reference
def provenance(src: dict) -> str:
    return f"`{src['command']}` at commit {src['commit']} on {src['cpu']}, {src['cores']} cores, {src['date']}"


def chain_rows(ref: dict, elsewhere: dict) -> list[dict]:
    """The whole-chain runs (base -> SFT -> methods) the docs know: those kept in elsewhere.json, the reference chain
    study's other chains and the reference run itself, each {"cpu", "command", "values": {flat key: number}}."""
    main = ref["main"]
    kept = {k for chain in elsewhere.get("chains", []) for k in chain["values"]}
    own = {"cpu": f"{main['source']['cpu']}, {main['source']['cores']} cores", "command": main["source"]["command"],
           "note": "the reference run", "values": {key: value for key, value in flatten(ref).items() if key in kept}}
    return [*elsewhere.get("chains", []), *study_chains(ref.get("chain_study")), own]


def study_chains(study: dict | None) -> list[dict]:
    """The chains of a chain study summary but the reference run's own (the default seed's)."""
    if not study:
        return []
    src, rows = study["source"], []
    for seed in (str(s) for s in study["seeds"] if str(s) != str(study.get("default_seed", 42))):
        values = {f"main.models.{m}.pass@1.estimate": v["pass1"][seed] for m, v in study["models"].items()
                  if seed in v["pass1"]}
        values.update({f"main.vs_sft.{m}.pass@1.diff": v["gain"][seed] for m, v in study["models"].items()
                       if seed in v.get("gain", {})})
        rows.append({"cpu": f"{src['cpu']}, {src['cores']} cores", "command": src["command"],
                     "note": f"chain seed {seed} of the reference chain study", "values": values})
    return rows


def spread(chains: list[dict]) -> dict[str, dict]:
    """Per flat key present in at least two chains: how many, their min, max and range (max - min)."""
    out = {}
    for key in dict.fromkeys(k for chain in chains for k in chain["values"]):
        values = [chain["values"][key] for chain in chains if chain["values"].get(key) is not None]
        if len(values) >= 2:
            out[key] = {"chains": len(values), "min": min(values), "max": max(values), "range": _r(max(values) - min(values))}
    return out


def flatten(tree, prefix: str = "") -> dict:
    """{"a.b.c": number} for every number (not bool) in nested dicts; the ``source`` records are left out."""
    out = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key != "source":
                out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        out[prefix] = tree
    return out


def is_cost(key: str) -> bool:
    """Times and memory: they differ between machines and runs without the results differing."""
    return bool(re.search(r"seconds|memory_mb", key))


def compare(reference: dict, own: dict, spreads: dict[str, dict]) -> list[dict]:
    """Every number of the reference summaries also in ``own`` that differs: reference, own, difference (ratio for
    times and memory), and where ``spreads`` has the key, whether it is within the largest seen between two runs."""
    own_flat, rows = flatten(own), []
    for key, ref_value in flatten({p: s for p, s in reference.items() if p in own}).items():
        value = own_flat.get(key)
        if value is None or value == ref_value:
            continue
        row = {"key": key, "reference": ref_value, "own": value, "difference": _r(value - ref_value)}
        if is_cost(key):
            row["ratio"] = _r(value / ref_value) if ref_value else None
        if key in spreads:
            row["spread"] = spreads[key]
            row["within"] = abs(value - ref_value) <= spreads[key]["range"]
        rows.append(row)
    return rows


def compare_report(rows: list[dict], reference: dict, own: dict, show_all: bool = False) -> str:
    """The differences as text: the sources side by side; each differing result number with a stated spread or in
    the headline (models, vs_sft), the rest counted (all with ``show_all``); times and memory as one median ratio."""
    lines = []
    for part in (part for part in reference if part in own):
        lines.append(f"{part}: reference {provenance(reference[part]['source'])}")
        lines.append(f"{' ' * len(part)}  yours     {provenance(own[part]['source'])}")
    sizes = [r for r in rows if re.fullmatch(r"main\.models\.\w+\.(problems|samples)", r["key"])]
    if sizes:
        lines.append(f"another config: {sizes[0]['key']} is {sizes[0]['own']:g}, the reference's "
                     f"{sizes[0]['reference']:g}; the numbers below are not comparable")
    keys = list(flatten({p: s for p, s in reference.items() if p in own}))
    results, costs = [r for r in rows if not is_cost(r["key"])], [r for r in rows if is_cost(r["key"])]
    shown = [r for r in results if show_all or "spread" in r or re.match(r"main\.(models|vs_sft)\.", r["key"])]
    for r in shown:
        text = f"  {r['key']}: {r['reference']:g} -> {r['own']:g} ({r['difference']:+g})"
        if "spread" in r:
            s = r["spread"]
            text += (f"  {'within' if r['within'] else 'OUTSIDE'} the spread between {s['chains']} whole runs "
                     f"({s['min']:g}-{s['max']:g}, range {s['range']:g})")
        lines.append(text)
    compared = sum(not is_cost(k) for k in keys)
    if results:
        outside, hidden = sum(1 for r in results if r.get("within") is False), len(results) - len(shown)
        lines.append(f"results: {len(results)} of {compared} numbers differ; {sum('spread' in r for r in results)} "
                     f"of those have a stated run-to-run spread, {outside} outside it"
                     + (f"; {hidden} more not shown (--all lists them)" if hidden else ""))
    else:
        lines.append(f"results: all {compared} numbers identical to the reference")
    ratios = [r["ratio"] for r in costs if r.get("ratio")]
    if ratios:
        lines.append(f"times and memory: {len(costs)} of {len(keys) - compared} differ, median ratio yours / "
                     f"reference x{float(np.median(ratios)):.2f}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- the command line
def load_reference(directory: Path) -> tuple[dict, dict]:
    parts = {part: read_json(directory / f"{part}.json") for part in PARTS if (directory / f"{part}.json").exists()}
    if "main" not in parts:
        sys.exit(f"no {directory / 'main.json'}: `make docs-reference` after `make run` writes it")
    elsewhere = directory / "elsewhere.json"
    return parts, read_json(elsewhere) if elsewhere.exists() else {}


def main() -> None:
    from thai_grpo_tools import reference_tables as rt

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["render", "summarise", "check", "compare"])
    parser.add_argument("--results", type=Path, default=REPO / "results", help="a run's results/ (default: ./results)")
    parser.add_argument("--reference", type=Path, default=REPO / "docs" / "reference")
    parser.add_argument("--time-file", type=Path, help="`time make run`'s output: the main run's wall time")
    parser.add_argument("--untimed", action="append", default=[], choices=list(PARTS),
                        help="summarise: a part whose times are not a measurement (e.g. interrupted and resumed)")
    parser.add_argument("--note", action="append", default=[], metavar="PART=TEXT",
                        help="summarise: a note on how a part was run, shown beside its times")
    parser.add_argument("--wall", action="append", default=[], metavar="PART=SECONDS",
                        help="summarise: a part's wall time, measured by `time` (a study run alone)")
    parser.add_argument("--all", action="store_true", help="compare: list every differing number")
    args = parser.parse_args()
    if args.command == "summarise":
        notes = dict(note.split("=", 1) for note in args.note)
        walls = {part: float(seconds) for part, seconds in (wall.split("=", 1) for wall in args.wall)}
        for part, summary in summaries(args.results.resolve(), args.time_file, args.untimed, notes, walls).items():
            write_json(args.reference / f"{part}.json", summary)
            print(f"wrote {args.reference / f'{part}.json'} ({summary['source']['command']})")
        return
    parts, elsewhere = load_reference(args.reference)
    if args.command == "compare":
        own = summaries(args.results.resolve(), None)
        print(compare_report(compare(parts, own, spread(chain_rows(parts, elsewhere))), parts, own, args.all))
        return
    tables, stale = rt.render_tables(parts, elsewhere), []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        if args.command == "check":
            stale += [f"{path.relative_to(REPO)}: table:{name}" for name in rt.stale_tables(text, tables)]
        elif rt.replace_tables(text, tables) != text:
            atomic_write_text(path, rt.replace_tables(text, tables))
            print(f"updated {path.relative_to(REPO)}")
    if stale:
        sys.exit("tables that differ from `make docs`:\n  " + "\n  ".join(stale))


if __name__ == "__main__":
    main()
