"""`make docs`, `make docs-reference`, `make compare`: the numbers of README.md and docs/, generated from small JSON
summaries of the reference run (docs/reference/*.json).

    python -m thai_grpo_tools.reference summarise   results/ -> docs/reference/*.json, with commit, command and CPU
    python -m thai_grpo_tools.reference render      the documents' generated blocks (thai_grpo_tools.reference_tables)
    python -m thai_grpo_tools.reference check       exit 1 naming every block that differs from what render writes
    python -m thai_grpo_tools.reference compare     results/ against the summaries, within the spread between runs
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
from thai_grpo_tools.compare_runs import flatten

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
KL_NAMES = ("exact", "k1", "k3", "k1_minus_exact", "k3_minus_exact")
KEEP = {"changes", "rates", "chapter_departures", "example"}  # kept as recorded: config values, not results
DIGITS = 4
SUMMARISERS = {}


def rounded(tree, key: str = ""):
    """Every float to DIGITS decimals, p-values (``p``, ``p_holm``) to two significant figures (a tiny p stays above
    0); the subtrees under ``KEEP`` as they are."""
    if isinstance(tree, dict):
        return {k: v if k in KEEP else rounded(v, k) for k, v in tree.items()}
    if isinstance(tree, list):
        return [rounded(v, key) for v in tree]
    if isinstance(tree, float):
        return float(f"{tree:.2g}") if key in ("p", "p_holm") else round(tree, DIGITS)
    return tree


def summariser(part: str):
    """Registers ``summarise(results) -> summary`` for ``part``, its numbers ``rounded``."""
    def register(summarise):
        def rounded_summary(data: dict) -> dict:
            return rounded(summarise(data))
        SUMMARISERS[part] = rounded_summary
        return rounded_summary
    return register


def interval(record: dict) -> dict:
    return {"estimate": record["estimate"], "low": record["bootstrap_low"], "high": record["bootstrap_high"]}


def contrast(test: dict, fields: str, turned: dict | None = None) -> dict:
    """A test's difference and interval (of ``turned``: the test read the other way round) and its ``fields``."""
    turned = turned or test
    read = {"p": lambda: test["p_value"], "n_resamples": lambda: test.get("n_resamples"),
            "p_at_floor": lambda: bool(test.get("p_at_floor")), "verdict": lambda: turned["verdict"],
            "family_text": lambda: family_text(test)}
    return {"diff": turned["mean_diff"], "low": turned["ci_low"], "high": turned["ci_high"],
            **{field: read.get(field, lambda: test[field])() for field in fields.split()}}


def pair_test(pairwise: list[dict], a: str, b: str, metric: str) -> dict | None:
    """The Holm-family test of ``a - b`` on ``metric``, whichever way round it was stored."""
    for test in pairwise:
        if test["metric"] == metric and {test["a"], test["b"]} == {a, b}:
            return contrast(test, "p n_resamples p_holm p_at_floor verdict family family_text",
                            oriented(test, test["b"]) if test["a"] != a else None)
    return None


def _thirds(steps: list[dict], key: str) -> list:
    values = np.array([np.nan if s.get(key) is None else s[key] for s in steps], dtype=float)
    window = max(1, values.size // 3)
    return [float(np.nanmean(p)) if np.isfinite(p).any() else None for p in (values[:window], values[-window:])]


def summarise_scores(results: dict) -> dict:
    """Per model pass@1, pass@n and greedy accuracy; each model against SFT (``pair_test``); every other pair."""
    models = {}
    for name, scores in results["eval"].items():
        largest = max((key for key in scores if re.fullmatch(r"pass@\d+", key)), key=lambda key: int(key[5:]))
        models[name] = {"pass@1": {**interval(scores["pass@1"]), "wilson_low": scores["pass@1"]["wilson_low"],
                                   "wilson_high": scores["pass@1"]["wilson_high"]},
                        "pass@n": {**interval(scores[largest]), "k": int(largest[5:])},
                        "greedy": interval(scores["greedy_accuracy"]),
                        "problems": scores["num_problems"], "samples": scores["n_samples"]}
    names = list(results["eval"])

    def tests(a, b):
        return {metric: pair_test(results["comparison"]["pairwise"], a, b, metric) for metric in ("pass@1", "greedy")}

    return {"models": models, "vs_sft": {m: tests(m, "sft") for m in names if m != "sft" and "sft" in names},
            "pairs": {f"{a} - {b}": tests(a, b) for i, b in enumerate(names) for a in names[i + 1:]
                      if "sft" not in (a, b)}}


@summariser("main")
def summarise_main(results: dict) -> dict:
    """Scores and tests, each trained run's rollout accuracy and KL (first -> last third) and health flag, the k1/k3
    study, PPO's reward model, each method's training cost and each stage's seconds."""
    runs = {name: {"accuracy": _thirds(run["steps"], "accuracy"), "kl": _thirds(run["steps"], "kl"),
                   "steps": len(run["steps"]),
                   "flagged": bool(run["health"]["hacking_suspect"] or run["health"]["truncation_failed"])}
            for name, run in results.get("runs", {}).items()}
    kl = ((results.get("kl_real") or {}).get("summary")) or None
    if kl:
        kl = {**{key: kl.get(key) for key in ("tokens", "completions", "problems")},
              "interval_unit": kl.get("interval_unit", "completions"),
              **{name: {**{k: kl["means"][name][k] for k in ("mean", "low", "high")},
                        "bootstrap_se": kl["means"][name].get("se")} for name in KL_NAMES},
              "exact_se_k1": kl["exact_se"]["k1"], "exact_se_k3": kl["exact_se"]["k3"],
              "share_k3_lower_variance": kl["share_k3_lower_variance"]}
    model = results.get("reward_model") or {}
    rm = {part: {key: (model.get(part) or {}).get(key) for key in ("accuracy", "pairs")} for part in ("train", "heldout")}
    costs = {row["model"]: {key: row.get(key) for key in ("train_seconds", "peak_memory_mb", "trainable_parameters")}
             for row in results["comparison"]["methods"] if row.get("model")}
    return {**summarise_scores(results), "training": runs, "kl_real": kl,
            "reward_model": rm if model.get("train") else None, "method_costs": costs,
            "stage_seconds": {stage: results["run"]["benchmarks"][stage] for stage in main_stages(results)},
            "chapter_departures": results["run"].get("chapter_departures")}


@summariser("passk")
def summarise_passk(passk: dict) -> dict:
    """pass@k at k = 1, 8 and n per model and per pair, where each pair's verdict changes, problems created and lost."""
    n = passk["n_samples"]
    ks = [k for k in (1, 8, n) if k <= n]

    def at(band: dict) -> dict:
        return {f"k={k}": {"estimate": band["mean"][k - 1], "low": band["low"][k - 1], "high": band["high"][k - 1]}
                for k in ks}

    crossing = ("first_k_includes_zero", "first_k_reversed", "first_k_sign_flip", "includes_zero_at_n")
    comparisons = {name: {**at(c["difference"]), **{key: c["crossing"][key] for key in crossing},
                          "k_reversed": _ranges(c["crossing"]["k_reversed"]),
                          **{key: c[key] for key in ("created", "lost", "both", "neither")}}
                   for name, c in passk["comparisons"].items()}
    return {"n": n, "problems": passk["num_problems"], "models": {m: at(band) for m, band in passk["curves"].items()},
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
    return {key: power.get(key) for key in ("effect", "alpha", "power_now", "seeds_needed", "seeds")}


@summariser("seeds")
def summarise_seeds(seeds: dict) -> dict:
    """Per method pass@1 per training seed, between-seed mean, t interval, SD, re-sampling SD, within-run SE and the
    crossed interval; each contrast against the baseline; the seeds the family needs."""
    methods = {m: {"per_seed": {str(r["seed"]): r["estimate"] for r in s["runs"]},
                   **{k: s["between_seed"][k] for k in ("mean", "t_low", "t_high", "sd")},
                   "crossed_low": s["crossed"]["low"], "crossed_high": s["crossed"]["high"],
                   "resampling_sd": s["resampling_sd"], "within_run_se": s["within_run_se"]}
               for m, s in seeds["methods"].items()}
    return {"seeds": seeds["training_seeds"], "methods": methods,
            "pairs": {f"{p['a']} - {p['b']}": contrast(p, "p p_holm df verdict family_text") for p in seeds["pairs"]},
            "power": _seed_power(seeds.get("power") or {})}


@summariser("hacking")
def summarise_hacking(hacking: dict) -> dict:
    """Per reward-hacking run each curve at step 1 and over the last third, the empty-think peak and its step, and
    the flag."""
    runs = {}
    for name, run in hacking["runs"].items():
        empty = [s.get("empty_think_share") for s in run["steps"]]
        peak = max(range(len(empty)), key=lambda i: -1 if empty[i] is None else empty[i]) if empty else None
        runs[name] = {"format_reward": run["format_reward"], "steps": len(run["steps"]),
                      **{key: {"start": run["means"][key]["start"], "last_third": run["means"][key]["last_third"]}
                         for key in HACKING_CURVES if key in run["means"]},
                      "empty_peak": empty[peak] if peak is not None else None,
                      "empty_peak_step": run["steps"][peak]["step"] if peak is not None else None,
                      "flagged": bool(run["health"]["hacking_suspect"]),
                      "outcome": hacking_outcome(run), "rates": run.get("rates")}
    return {"runs": runs, "title": hacking.get("title")}


@summariser("chain_study")
def summarise_chain_study(study: dict) -> dict:
    """Per model pass@1 per chain and the methods' gain over SFT with its crossed mean; each pair's test; the chains
    each family needs; the sampling seeds and the hacking runs per variant."""
    models = {}
    for model, entry in study["models"].items():
        models[model] = {"pass1": {str(c["seed"]): c["pass@1"]["estimate"] for c in entry["chains"]}}
        if "gain_over_sft" in entry:
            gain = entry["gain_over_sft"]
            models[model]["gain"] = {str(c["seed"]): c["gain_over_sft"]["estimate"] for c in entry["chains"]}
            models[model]["gain_mean"] = {"diff": gain["mean"], "low": gain["low"], "high": gain["high"], "df": gain["df"]}
    power = {family: {k: f[k] for k in ("effect", "alpha", "chains_needed")}
             for family, f in ((study.get("power") or {}).get("families") or {}).items()}
    return {"seeds": study["seeds"], "default_seed": study.get("default_seed"), "n_resamples": study["n_resamples"],
            "models": models, "pairs": {f"{p['a']} - {p['b']}": contrast(
                p, "df p p_holm p_at_floor verdict family family_text") for p in study["pairs"]["pass@1"]},
            "power": power, "sampling_seeds": study.get("sampling_seeds"),
            "hacking": {name: v["sentence"] for name, v in ((study.get("hacking") or {}).get("variants") or {}).items()}}


@summariser("losses")
def summarise_losses(losses: dict) -> dict:
    """Per loss variant what it changes, its first metric per seed and crossed mean, its flagged runs and seconds;
    per metric each variant against the baseline; the seeds the family needs."""
    metric = losses["metrics"][0]
    variants = {name: {"changes": v.get("changes") or {},
                       "per_seed": {str(run["seed"]): value for run, value in zip(v["runs"],
                                                                                  v["metrics"][metric]["per_seed"])},
                       "mean": v["metrics"][metric]["between_seed"]["mean"],
                       "crossed_low": v["metrics"][metric]["crossed"]["low"],
                       "crossed_high": v["metrics"][metric]["crossed"]["high"], "flagged": v.get("flagged") or [],
                       "seconds": v["cost"]["sum_seconds"]} for name, v in losses["variants"].items()}
    versus = {m: {t["variant"]: contrast(t, "p_holm verdict family_text") for t in tests}
              for m, tests in losses["versus"].items()}
    return {"baseline": losses["baseline"], "seeds": losses["training_seeds"], "metric": metric,
            "metrics": losses["metrics"], "problems": losses["num_problems"], "samples": losses["n_samples"],
            "variants": variants, "versus": versus, "power": _seed_power(losses.get("power") or {})}


@summariser("pitfalls")
def summarise_pitfalls(results: dict) -> dict:
    scores = summarise_scores(results)
    return {"models": scores["models"], "vs_sft": scores["vs_sft"]}


@summariser("bench")
def summarise_bench(bench: dict) -> dict:
    """`make bench`: each method's step and held-out sampling split into parts, and the last run on other CPUs."""
    def split(record: dict) -> dict:
        return {"threads": record.get("threads"), "seconds": dict(record["seconds"])}

    def threads(record: dict) -> str:
        return f"{record['threads']} thread{'s' if record['threads'] > 1 else ''}"

    steps = {f"GRPO ({threads(record)})": split(record) for record in bench.get("grpo_step", [])}
    steps.update({name: split(bench[key]) for key, name in (("dr_grpo_step", "Dr.GRPO"), ("ppo_step", "PPO"),
                                                            ("dpo_step", "DPO")) if bench.get(key)})
    steps.update({f"held-out sampling, {record['problems']} problems ({threads(record)})": split(record)
                  for record in bench.get("heldout_sampling", [])})
    return {"cpu": bench.get("cpu"), "steps": steps, "other_cpus": bench.get("other_cpus", [])}


def example_problem(samples: dict[str, list[dict]], before: str = "sft", after: str = "grpo") -> dict | None:
    """One held-out problem with each model's greedy answer and reward breakdown: the first ``after`` answers right
    and ``before`` wrong, else the first ``after`` answers right."""
    if before not in samples or after not in samples:
        return None
    pairs = list(zip(samples[before], samples[after]))
    chosen = next((b for b, a in pairs if a["greedy"]["correct"] and not b["greedy"]["correct"]), None) or \
        next((b for b, a in pairs if a["greedy"]["correct"]), None)
    if chosen is None:
        return None
    index = [b["id"] for b, _ in pairs].index(chosen["id"])
    return {"id": chosen["id"], "index": index, "question": chosen["question"], "gold": chosen["gold"],
            "greedy": {model: {key: samples[model][index]["greedy"][key]
                               for key in ("text", "correct", "format", "thai", "total")} for model in (before, after)}}


# ----------------------------------------------------------------------------------------- where a summary came from
def stage_span(stages: dict[str, tuple[float, float]]) -> float | None:
    """Wall seconds from the first job's start to the last job's end; ``stages``: {stem: (end time, seconds)}."""
    return max(end for end, _ in stages.values()) - min(end - s for end, s in stages.values()) if stages else None


def target_stages(part: str, stems: list[str]) -> list[str]:
    """The benchmark stems of an optional target's jobs; for seeds also the retrained runs' (``<job>-<variant>-seed<N>``)."""
    chosen = [s for s in stems if s.startswith(TARGET_STAGES.get(part, ()))]
    if part == "seeds":
        chosen += [s for s in stems if re.fullmatch(r"(train|sample|score)-.+-seed\d+", s)]
    return sorted(set(chosen))


def study_job_seconds(part: str, data: dict) -> float | None:
    """The summed seconds of a study's own jobs as its results record them (None where they do not)."""
    cost = data.get("cost") or {}
    if part in ("seeds", "losses"):
        return cost.get("sum_seconds")
    if part == "pitfalls":  # the pitfall and ablation variants' own jobs (the methods' are the main run's)
        variants = data.get("config", {}).get("variants") or {}
        own = {name for name, v in variants.items() if v.get("group") in ("pitfall", "ablation")}
        seconds = [s for stem, s in data["run"]["benchmarks"].items()
                   if stem.split("-", 1)[-1] in own or stem.startswith(TARGET_STAGES["pitfalls"])]
    else:
        seconds = {"chain_study": [s for seed, s in (cost.get("per_chain_seconds") or {}).items()
                                   if str(seed) != str(data.get("default_seed"))],
                   "hacking": list((data.get("seconds") or {}).values()),
                   "passk": list((data.get("benchmarks") or {}).values())}.get(part)
    return sum(seconds) if seconds else None


def main_stages(results: dict) -> list[str]:
    """The main run's benchmark stems, without an optional target's jobs that ran before it (same folder)."""
    optional = tuple(prefix for prefixes in TARGET_STAGES.values() for prefix in prefixes)
    return [stem for stem in results["run"]["benchmarks"] if not stem.startswith(optional)]


def source(part: str, commit: str, cpu: str, cores: int, wall_seconds: float | None, jobs_seconds: float | None,
           date: str, note: str | None = None) -> dict:
    """Where a summary came from: command, commit, CPU, cores, date, wall and jobs' seconds (None: not measured)."""
    return rounded({"command": PARTS[part][1], "results": f"results/{PARTS[part][0]}", "commit": commit, "cpu": cpu,
                    "cores": cores, "wall_seconds": wall_seconds, "jobs_seconds": jobs_seconds, "date": date,
                    "note": note})


def wall_from_time_output(text: str) -> float | None:
    """Wall seconds from bash's ``time`` (``real 11m52.123s``) or GNU time (``0:11:52elapsed``, ``Elapsed (wall
    clock) time ...: 11:52.12``); None when neither is there."""
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
    get no times, ``notes`` a note each, ``walls`` a measured wall time each."""
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
        wall, jobs = stage_span(stages), sum(s for _, s in stages.values()) or None
        if part == "main" and time_file:
            wall = wall_from_time_output(time_file.read_text()) or wall
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


def chain_row(src: dict, note: str, values: dict) -> dict:
    return {"cpu": f"{src['cpu']}, {src['cores']} cores", "command": src["command"], "note": note, "values": values}


def chain_rows(ref: dict, elsewhere: dict) -> list[dict]:
    """The whole-chain runs the docs know: those kept in elsewhere.json, the reference chain study's other chains and
    the reference run itself, each {"cpu", "command", "note", "values": {flat key: number}}."""
    kept = {k for chain in elsewhere.get("chains", []) for k in chain["values"]}
    own = {key: value for key, value in numbers(ref).items() if key in kept}
    return [*elsewhere.get("chains", []), *study_chains(ref.get("chain_study")),
            chain_row(ref["main"]["source"], "the reference run", own)]


def study_chains(study: dict | None) -> list[dict]:
    """The chains of a chain study summary but the reference run's own (the default seed's)."""
    rows = []
    for seed in (str(s) for s in (study or {}).get("seeds", []) if str(s) != str(study.get("default_seed", 42))):
        values = {f"main.models.{m}.pass@1.estimate": v["pass1"][seed] for m, v in study["models"].items()
                  if seed in v["pass1"]}
        values.update({f"main.vs_sft.{m}.pass@1.diff": v["gain"][seed] for m, v in study["models"].items()
                       if seed in v.get("gain", {})})
        rows.append(chain_row(study["source"], f"chain seed {seed} of the reference chain study", values))
    return rows


def spread(chains: list[dict]) -> dict[str, dict]:
    """Per flat key present in at least two chains: how many, their min, max and range (max - min)."""
    out = {}
    for key in dict.fromkeys(k for chain in chains for k in chain["values"]):
        values = [chain["values"][key] for chain in chains if chain["values"].get(key) is not None]
        if len(values) >= 2:
            out[key] = {"chains": len(values), "min": min(values), "max": max(values),
                        "range": round(max(values) - min(values), DIGITS)}
    return out


def numbers(summaries: dict) -> dict:
    """{"part.a.b": number} for every number (not bool) of ``{part: summary}``, the ``source`` records left out."""
    leaves = flatten({part: {k: v for k, v in s.items() if k != "source"} for part, s in summaries.items()})
    return {key: v for key, v in leaves.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def is_cost(key: str) -> bool:
    """Times and memory: they differ between machines and runs without the results differing."""
    return bool(re.search(r"seconds|memory_mb", key))


def compare(reference: dict, own: dict, spreads: dict[str, dict]) -> list[dict]:
    """Every number of the reference summaries also in ``own`` that differs: reference, own, difference (and ratio for
    times and memory), and where ``spreads`` has the key, whether it is within the largest seen between two runs."""
    own_flat, rows = numbers(own), []
    for key, ref_value in numbers({p: s for p, s in reference.items() if p in own}).items():
        value = own_flat.get(key)
        if value is None or value == ref_value:
            continue
        row = {"key": key, "reference": ref_value, "own": value, "difference": round(value - ref_value, DIGITS)}
        if is_cost(key):
            row["ratio"] = round(value / ref_value, DIGITS) if ref_value else None
        if key in spreads:
            row.update(spread=spreads[key], within=abs(value - ref_value) <= spreads[key]["range"])
        rows.append(row)
    return rows


def compare_report(rows: list[dict], reference: dict, own: dict, show_all: bool = False) -> str:
    """The differences as text: the sources side by side; each differing result with a stated spread or in the
    headline (all with ``show_all``), the rest counted; times and memory as one median ratio."""
    lines = []
    for part in (part for part in reference if part in own):
        lines += [f"{part}: reference {provenance(reference[part]['source'])}",
                  f"{' ' * len(part)}  yours     {provenance(own[part]['source'])}"]
    sizes = [r for r in rows if re.fullmatch(r"main\.models\.\w+\.(problems|samples)", r["key"])]
    if sizes:
        lines.append(f"another config: {sizes[0]['key']} is {sizes[0]['own']:g}, the reference's "
                     f"{sizes[0]['reference']:g}; the numbers below are not comparable")
    keys = list(numbers({p: s for p, s in reference.items() if p in own}))
    results, costs = [r for r in rows if not is_cost(r["key"])], [r for r in rows if is_cost(r["key"])]
    shown = [r for r in results if show_all or "spread" in r or re.match(r"main\.(models|vs_sft)\.", r["key"])]
    for r in shown:
        s = r.get("spread")
        lines.append(f"  {r['key']}: {r['reference']:g} -> {r['own']:g} ({r['difference']:+g})" + (
            f"  {'within' if r['within'] else 'OUTSIDE'} the spread between {s['chains']} whole runs "
            f"({s['min']:g}-{s['max']:g}, range {s['range']:g})" if s else ""))
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
    """The reference summaries {part: summary} and elsewhere.json (runs on other machines), the one reader of both."""
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
        walls = {part: float(seconds) for part, seconds in (wall.split("=", 1) for wall in args.wall)}
        found = summaries(args.results.resolve(), args.time_file, args.untimed,
                          dict(note.split("=", 1) for note in args.note), walls)
        for part, summary in found.items():
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
