"""`make docs`, `make docs-reference`, `make compare`: the numbers of README.md and docs/, generated from small JSON
summaries of the reference run (docs/reference/*.json).

    python -m thai_grpo_tools.reference summarise   results/ -> docs/reference/*.json, with commit, command and CPU
    python -m thai_grpo_tools.reference render      rewrite each ``<!-- table:NAME -->`` block (``TABLES``)
    python -m thai_grpo_tools.reference compare     results/ against the summaries, within the spread between runs
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import sys
from pathlib import Path

import numpy as np

from thai_grpo.core.io import atomic_write_text, read_json, read_jsonl, write_json
from thai_grpo.evaluation.plan import VERDICTS
from thai_grpo.jobs.machine import commit_of, this_cpu
from thai_grpo.report.plan_words import FAMILY_NAMES, VERDICT_WORDS, family_text, fmt_p
from thai_grpo.report.results import benchmark_column
from thai_grpo.report.verdicts import oriented
from thai_grpo_studies.hacking_words import hacking_outcome
from thai_grpo_tools.compare_runs import flatten
from thai_grpo_tools.memory_plan import REPO, grid, markdown_table, real_config, stage_plans
from thai_grpo_tools.rehearse_full import table as gpu_check_table

#: The parts of a run a summary is made of: results file under results/, and the command that builds it.
PARTS = {"main": ("results.json", "make run"),
         **{part: (f"{target}/results.json", f"snakemake --cores 2 {target}") for part, target in (
             ("passk", "passk"), ("seeds", "seeds"), ("hacking", "hacking"), ("pitfalls", "pitfalls"),
             ("losses", "losses"), ("chain_study", "chains"))},
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
SUMMARISERS, TABLES = {}, {}


# ----------------------------------------------------------------------------------------- summaries of a run
def rounded(tree, key: str = ""):
    """Floats to DIGITS decimals, p-values to two significant figures (a tiny p stays above 0); ``KEEP`` as is."""
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
        SUMMARISERS[part] = lambda data: rounded(summarise(data))
        return SUMMARISERS[part]
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
    """Scores and tests, each run's training curves (first -> last third) and health, the k1/k3 study, costs."""
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
    """Per method pass@1 per training seed and its spreads; each contrast against the baseline; the seeds needed."""
    methods = {m: {"per_seed": {str(r["seed"]): r["estimate"] for r in s["runs"]},
                   **{k: s["between_seed"][k] for k in ("mean", "t_low", "t_high", "sd")},
                   "crossed_low": s["crossed"]["low"], "crossed_high": s["crossed"]["high"],
                   **{k: s[k] for k in ("resampling_sd", "within_run_se")}} for m, s in seeds["methods"].items()}
    return {"seeds": seeds["training_seeds"], "methods": methods,
            "pairs": {f"{p['a']} - {p['b']}": contrast(p, "p p_holm df verdict family_text") for p in seeds["pairs"]},
            "power": _seed_power(seeds.get("power") or {})}


@summariser("hacking")
def summarise_hacking(hacking: dict) -> dict:
    """Per reward-hacking run each curve at step 1 and over the last third, the empty-think peak, the flag."""
    runs = {}
    for name, run in hacking["runs"].items():
        empty = [s.get("empty_think_share") for s in run["steps"]]
        peak = max(range(len(empty)), key=lambda i: -1 if empty[i] is None else empty[i]) if empty else None
        runs[name] = {"format_reward": run["format_reward"], "steps": len(run["steps"]),
                      **{key: {"start": run["means"][key]["start"], "last_third": run["means"][key]["last_third"]}
                         for key in HACKING_CURVES if key in run["means"]},
                      "empty_peak": empty[peak] if peak is not None else None,
                      "empty_peak_step": run["steps"][peak]["step"] if peak is not None else None,
                      "flagged": bool(run["health"]["hacking_suspect"]), "outcome": hacking_outcome(run),
                      "rates": run.get("rates")}
    return {"runs": runs, "title": hacking.get("title")}


@summariser("chain_study")
def summarise_chain_study(study: dict) -> dict:
    """Per model pass@1 and gain over SFT per chain; each pair's test; the chains each family needs; hacking."""
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
    """Per loss variant its changes, first metric per seed, flags and seconds; each against the baseline per metric."""
    metric = losses["metrics"][0]

    def variant(v: dict) -> dict:
        scores = v["metrics"][metric]
        return {"changes": v.get("changes") or {},
                "per_seed": {str(run["seed"]): value for run, value in zip(v["runs"], scores["per_seed"])},
                "mean": scores["between_seed"]["mean"], "crossed_low": scores["crossed"]["low"],
                "crossed_high": scores["crossed"]["high"], "flagged": v.get("flagged") or [],
                "seconds": v["cost"]["sum_seconds"]}

    versus = {m: {t["variant"]: contrast(t, "p_holm verdict family_text") for t in tests}
              for m, tests in losses["versus"].items()}
    return {"baseline": losses["baseline"], "seeds": losses["training_seeds"], "metric": metric,
            "metrics": losses["metrics"], "problems": losses["num_problems"], "samples": losses["n_samples"],
            "variants": {name: variant(v) for name, v in losses["variants"].items()}, "versus": versus,
            "power": _seed_power(losses.get("power") or {})}


@summariser("pitfalls")
def summarise_pitfalls(results: dict) -> dict:
    return {key: value for key, value in summarise_scores(results).items() if key in ("models", "vs_sft")}


@summariser("bench")
def summarise_bench(bench: dict) -> dict:
    """`make bench`: each method's step and held-out sampling split into parts."""
    def split(record: dict) -> dict:
        return {"threads": record.get("threads"), "seconds": dict(record["seconds"])}

    def threads(record: dict) -> str:
        return f"{record['threads']} thread{'s' if record['threads'] > 1 else ''}"

    steps = {f"GRPO ({threads(record)})": split(record) for record in bench.get("grpo_step", [])}
    steps.update({name: split(bench[key]) for key, name in (("dr_grpo_step", "Dr.GRPO"), ("ppo_step", "PPO"),
                                                            ("dpo_step", "DPO")) if bench.get(key)})
    steps.update({f"held-out sampling, {record['problems']} problems ({threads(record)})": split(record)
                  for record in bench.get("heldout_sampling", [])})
    return {"cpu": bench.get("cpu"), "steps": steps}


def example_problem(samples: dict[str, list[dict]], before: str = "sft", after: str = "grpo") -> dict | None:
    """The first held-out problem ``after`` answers right and ``before`` wrong (else right), both greedy answers."""
    if before not in samples or after not in samples:
        return None
    pairs = list(enumerate(zip(samples[before], samples[after])))
    index = next((i for i, (b, a) in pairs if a["greedy"]["correct"] and not b["greedy"]["correct"]),
                 next((i for i, (_, a) in pairs if a["greedy"]["correct"]), None))
    if index is None:
        return None
    chosen = samples[before][index]
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
    """Wall seconds from bash's ``time`` (``real 11m52.123s``) or GNU time's output; None when neither is there."""
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
    """{part: summary with its source} for each part under ``results``; ``untimed``, ``notes``, ``walls`` by part."""
    if not (results / "results.json").exists():
        sys.exit(f"no {results / 'results.json'}: run `make run` first (or pass --results DIR)")

    commit, cpu, cores = commit_of(results.parent), this_cpu(), len(os.sched_getaffinity(0))
    timed = {stem: ((results / "benchmarks" / f"{stem}.tsv").stat().st_mtime, s)
             for stem, s in benchmark_column(results / "benchmarks", "s").items()}
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
    """The whole-chain runs the docs know (elsewhere.json's, the chain study's, the reference run): ``chain_row``s."""
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
    """Each reference number that differs in ``own``: both, the difference (costs: ratio), within the spread or not."""
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
    """The differences as text: sources, the results with a spread or in the headline (``show_all``: all), costs."""
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


# ----------------------------------------------------------------------------------------- the generated tables
LABELS = {"base": "base (no adapter)", "sft": "SFT", "grpo": "GRPO", "dr_grpo": "Dr.GRPO", "rloo": "RLOO",
          "dpo": "DPO", "ppo": "PPO (reward model)", "ppo_verifier": "PPO (verifier)"}
P_FAMILY, VERDICT_PLAN = "p (adjusted in its family)", "verdict (family; the declared plan)"


def fmt(value, digits: int = 3, signed: bool = False) -> str:
    return "-" if value is None else f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def fmt_interval(record: dict, key: str = "estimate", signed: bool = False, digits: int = 3) -> str:
    return (f"{fmt(record[key], digits, signed)} [{fmt(record['low'], digits, signed)}, "
            f"{fmt(record['high'], digits, signed)}]")


def diff(test: dict) -> str:
    return fmt_interval(test, "diff", True)


def test_p(test: dict) -> str:
    return fmt_p(test["p_holm"], bool(test.get("p_at_floor")))


def verdict_cell(test: dict) -> str:
    """'higher (primary comparison)'."""
    return f"{VERDICT_WORDS[test['verdict']]} ({FAMILY_NAMES.get(test['family'], test['family'])})"


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, rest = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {rest} s" if minutes else f"{rest} s"


def label(model: str) -> str:
    return LABELS.get(model, model)


def pair_label(pair: str) -> str:
    """'dr_grpo - grpo' -> 'Dr.GRPO - GRPO'."""
    return " - ".join(label(m) for m in pair.replace("_vs_", " - ").split(" - "))


def titled(source: dict, body: str, after: str = "") -> str:
    return f"{provenance(source)}{after}:\n\n{body}"


def missing(part: str) -> str:
    return f"*Not in the reference run yet: `{PARTS[part][1]}`, then `make docs-reference`, puts it here.*"


def table(name: str, *parts: str):
    """Registers a block's renderer (ref, elsewhere) -> markdown; lacking one of ``parts``, it says how to make it."""
    def register(render):
        def checked(ref: dict, elsewhere: dict | None = None) -> str:
            lacking = next((part for part in parts if not ref.get(part)), None)
            return missing(lacking) if lacking else render(ref, elsewhere or {})
        TABLES[name] = checked
        return checked
    return register


@table("headline")
def table_headline(ref, _):
    main, rows = ref["main"], []
    for name, m in main["models"].items():
        t = main["vs_sft"].get(name, {}).get("pass@1")
        rows.append([label(name), fmt_interval(m["pass@1"]), fmt(m["pass@n"]["estimate"]), fmt(m["greedy"]["estimate"]),
                     *([diff(t), test_p(t), verdict_cell(t)] if t else ["", "", ""])])
    k = next(iter(main["models"].values()))["pass@n"]["k"]
    return titled(main["source"], grid(["model", "pass@1 [95% over problems]", f"pass@{k}", "greedy",
                                        "pass@1 - SFT [95% paired]", P_FAMILY, VERDICT_PLAN], rows))


@table("costs")
def table_costs(ref, elsewhere):
    """Wall time of each command on the reference run's CPU and on the CPUs of elsewhere.json's ``costs``."""
    main, kept = ref["main"]["source"], elsewhere.get("costs", [])
    others = list(dict.fromkeys(c["cpu"] for c in kept))

    def there(cost):
        return "-" if cost is None else \
            f"{fmt_seconds(cost['wall_seconds'])} ({cost.get('commit') or 'an earlier commit, not recorded'})"

    rows = []
    for part, (_, command) in PARTS.items():
        src = (ref.get(part) or {}).get("source")
        own = "not run yet" if not src else fmt_seconds(src["wall_seconds"]) if src["wall_seconds"] else \
            f"{fmt_seconds(src['jobs_seconds'])} of jobs" if src.get("jobs_seconds") else "not measured"
        measured = {c["cpu"]: c for c in kept if c["part"] == part}
        rows.append([f"`{command}`", own, *(there(measured.get(cpu)) for cpu in others)])
    notes: dict[str, list[str]] = {}  # one note, once, for every command it describes
    for part, summary in ref.items():
        if summary["source"].get("note"):
            notes.setdefault(summary["source"]["note"], []).append(PARTS[part][1])
    return grid(["command", f"{main['cpu']}, {main['cores']} cores (reference run)", *others], rows) + \
        "".join(f"\n\n*{', '.join(names)}: {note}*" for note, names in notes.items())


@table("pairs")
def table_pairs(ref, _):
    rows = [[pair_label(pair), diff(t["pass@1"]), test_p(t["pass@1"]), verdict_cell(t["pass@1"])]
            for pair, t in ref["main"]["pairs"].items() if t["pass@1"] and "base" not in pair]
    return titled(ref["main"]["source"], grid(["pair (pass@1)", "difference [95% paired]", P_FAMILY, VERDICT_PLAN],
                                              rows))


@table("kl")
def table_kl(ref, _):
    kl = ref["main"].get("kl_real")
    if not kl:
        return "*The reference run has no k1/k3 study.*"
    rows = [[name.replace("_minus_", " - "), fmt_interval(kl[name], "mean", "minus" in name, 4),
             fmt(kl[name].get("bootstrap_se"), 4), fmt(kl.get(f"exact_se_{name}"), 4) if name in ("k1", "k3") else ""]
            for name in KL_NAMES]
    unit = kl.get("interval_unit", "completions")
    of = f"{kl['completions']} completions" + (f" of {kl['problems']} problems" if kl.get("problems") else "")
    caveat = ("" if unit == "problems" else "\n\n*These intervals resample completions, not problems: where the KL "
              "varies by problem they are too narrow. `make docs-reference` on a new run gives them over problems.*")
    return titled(ref["main"]["source"], grid(["per token", f"mean [95% over {unit}]", "bootstrap SE",
                                               "exact SE (full distributions)"], rows),
                  f"; {kl['tokens']} tokens of {of}; k3 has the lower exact variance at "
                  f"{kl['share_k3_lower_variance']:.0%} of the positions") + caveat


@table("ppo")
def table_ppo(ref, _):
    main, rm = ref["main"], ref["main"].get("reward_model")
    if not rm or "ppo" not in main["models"]:
        return "*The reference run has no PPO row.*"
    t, run = main["vs_sft"]["ppo"]["pass@1"], main["training"].get("ppo", {})
    rows = [[f"reward model: share of {what} pairs ordered right", f"{fmt(rm[part]['accuracy'], 2)} of "
             f"{rm[part]['pairs']}"] for part, what in (("train", "its training"), ("heldout", "held-out"))]
    rows += [["PPO rollout accuracy, first -> last third", " -> ".join(fmt(v, 2) for v in run.get("accuracy", []))],
             ["PPO held-out pass@1 - SFT [95% paired]", f"{diff(t)}, adjusted p {test_p(t)}, {verdict_cell(t)}"]]
    return titled(main["source"], grid(["", "value"], rows))


CHAIN_COLUMNS = {"SFT": "main.models.sft.pass@1.estimate", "GRPO": "main.models.grpo.pass@1.estimate",
                 "GRPO - SFT": "main.vs_sft.grpo.pass@1.diff", "Dr.GRPO - GRPO": "main.pairs.dr_grpo - grpo.pass@1.diff",
                 "PPO - SFT": "main.vs_sft.ppo.pass@1.diff"}


@table("chains")
def table_chains(ref, elsewhere):
    """One row per whole chain with pass@1 values, and each column's range over the chains."""
    chains = chain_rows(ref, elsewhere)
    rows = [[c["cpu"], f"`{c['command']}`", c.get("note", ""),
             *(fmt(c["values"].get(key), signed=" - " in name) for name, key in CHAIN_COLUMNS.items())]
            for c in chains if any(key in c["values"] for key in CHAIN_COLUMNS.values())]
    widths = spread(chains)
    rows.append(["range", "", "", *(fmt((widths.get(key) or {}).get("range")) for key in CHAIN_COLUMNS.values())])
    return "pass@1 on the 200 held-out problems:\n\n" + grid(["CPU", "command", "run", *CHAIN_COLUMNS], rows)


@table("spread")
def table_spread(ref, elsewhere):
    def number(value):
        return str(value) if isinstance(value, int) else fmt(value)

    rows = [[pretty_key(key), str(s["chains"]), *(number(s[k]) for k in ("min", "max", "range"))]
            for key, s in spread(chain_rows(ref, elsewhere)).items()]
    return grid(["quantity", "chains", "min", "max", "range (the spread make compare uses)"], rows)


@table("stages")
def table_stages(ref, _):
    main, stages = ref["main"], ref["main"]["stage_seconds"]
    if main["source"]["wall_seconds"] is None:
        return f"*Not measured in the reference run: {main['source'].get('note') or 'no wall time recorded'}.*"
    rows = [[f"`{stage}`", f"{seconds:.0f}"] for stage, seconds in sorted(stages.items(), key=lambda kv: -kv[1])]
    return titled(main["source"], grid(["stage (rule-wildcard)", "seconds"],
                                       rows + [["all jobs (sum)", f"{sum(stages.values()):.0f}"]]))


@table("example")
def table_example(ref, _):
    """One held-out problem with SFT's and GRPO's greedy answers and their reward breakdown."""
    example = ref["main"].get("example")
    if not example:
        return missing("main")
    greedy = example["greedy"]
    rows = [["answer", *("<br>".join(line.replace("|", "\\|") for line in a["text"].strip().splitlines())
                         for a in greedy.values())]]
    rows += [[part, *(f"{a[part]:.1f}" for a in greedy.values())] for part in ("correct", "format", "thai", "total")]
    return titled(ref["main"]["source"], f"> {example['question']}\n\n"
                  + grid(["", *(f"{label(m)} (greedy)" for m in greedy)], rows),
                  f", held-out problem {example['index'] + 1} (gold answer {example['gold']})")


@table("run-times")
def table_run_times(ref, elsewhere):
    """When `make run` shows the headline and when it ends, per CPU: measured runs of known code only."""
    main = ref["main"]["source"]
    runs = [{**main, "cpu": f"{main['cpu']}, {main['cores']} cores"}] if main.get("wall_seconds") else []
    runs += [c for c in elsewhere.get("costs", []) if c["part"] == "main" and c.get("commit")]
    rows = [[r["cpu"], fmt_seconds(r.get("headline_seconds")), fmt_seconds(r["wall_seconds"]), r["commit"],
             r.get("note") or "measured"] for r in runs]
    return grid(["CPU", "headline ready (after the jobs start)", "whole run (`time make run`, venv included)",
                 "commit", "how"], rows) if rows else missing("main")


@table("bench-steps", "bench")
def table_bench_steps(ref, _):
    """`make bench`'s split of one step of each method (and of held-out sampling) into its parts, in seconds."""
    rows = [[name, f"{step['seconds']['total']:.2f}", "; ".join(f"{part} {value:.2f}" for part, value in
                                                               step["seconds"].items() if part != "total" and value)]
            for name, step in ref["bench"]["steps"].items()]
    return titled(ref["bench"]["source"], grid(["step", "seconds", "parts (seconds)"], rows))


@table("passk", "passk")
def table_passk(ref, _):
    passk = ref["passk"]
    n = passk["n"]
    rows = [[label(m), *(fmt_interval(v[f"k={k}"]) for k in (1, 8, n))] for m, v in passk["models"].items()]
    rows += [[pair_label(name), *(fmt_interval(c[f"k={k}"], signed=True) for k in (1, 8, n))]
             for name, c in passk["comparisons"].items()]
    out = grid(["pass@k [95% over problems]", "k = 1", "k = 8", f"k = {n}"], rows)
    c = passk["comparisons"].get("grpo_vs_sft")
    if c:
        def at(k):
            return f"k = {k}" if k else f"no k up to {n}"
        out += (f"\n\nGRPO - SFT: the band first holds 0 at {at(c['first_k_includes_zero'])}; the point estimates "
                f"cross at {at(c['first_k_sign_flip'])}; SFT ahead with the band clear of 0 at k = {c['k_reversed']}. "
                f"Problems GRPO solved at least once and SFT never did (created): {c['created']}; the reverse (lost): "
                f"{c['lost']}; both: {c['both']}; neither: {c['neither']}.")
    return titled(passk["source"], out, f", {passk['problems']} problems x {n} samples")


def family_of(tests: dict) -> str:
    return next((t["family_text"] for t in tests.values()), "")


@table("seeds", "seeds")
def table_seeds(ref, _):
    seeds = ref["seeds"]
    order = [str(s) for s in seeds["seeds"]]
    rows = [[label(m), *(fmt(v["per_seed"].get(s)) for s in order), f"{fmt(v['mean'])} [{fmt(v['t_low'])}, "
             f"{fmt(v['t_high'])}]", f"[{fmt(v['crossed_low'])}, {fmt(v['crossed_high'])}]",
             *(fmt(100 * v[k], 1) for k in ("sd", "resampling_sd", "within_run_se"))] for m, v in seeds["methods"].items()]
    family = family_of(seeds["pairs"])
    head = ["method", *(f"seed {s}" for s in order), "mean [t 95% over seeds]", "crossed 95% (seeds and problems)",
            "seed SD (points)", "re-sampling SD", "within-run SE"]
    contrasts = grid(["contrast", "difference [simultaneous 95%]", "p (Dunnett-adjusted)", "verdict"],
                     [[pair_label(c), diff(v), fmt_p(v["p_holm"]), VERDICT_WORDS[v["verdict"]]]
                      for c, v in seeds["pairs"].items()])
    return titled(seeds["source"], f"{grid(head, rows)}\n\n{contrasts}" + (f"\n\nFamily: {family}." if family else ""))


@table("hacking", "hacking")
def table_hacking(ref, _):
    def move(run, key, share=False):
        show = (lambda v: "-" if v is None else f"{v:.0%}") if share else (lambda v: fmt(v, 2))
        return f"{show(run[key]['start'])} -> {show(run[key]['last_third'])}"

    rows = [[f"`{name}`", move(r, "reward_mean"), move(r, "accuracy"), move(r, "empty_think_share", True),
             f"{r['empty_peak']:.0%} (step {r['empty_peak_step']})", move(r, "hollow_think_paid_share", True),
             move(r, "clipped_ratio", True), r.get("outcome") or ("flagged" if r["flagged"] else "quiet")]
            for name, r in ref["hacking"]["runs"].items()]
    return titled(ref["hacking"]["source"], grid(["run", "mean reward", "accuracy", "empty think", "empty think, peak",
                                                  "paid, no reasoning", "cut at budget", "detector (sliding window)"],
                                                 rows), "; step 1 -> mean of the last third of the steps")


@table("chain-study", "chain_study")
def table_chain_study(ref, _):
    study = ref["chain_study"]
    order = [str(s) for s in study["seeds"]]
    rows = [[label(m), *(fmt(v["pass1"].get(s)) + (f" ({fmt(v['gain'].get(s), signed=True)})" if "gain" in v else "")
                         for s in order),
             fmt_interval(v["gain_mean"], "diff", True) if "gain_mean" in v else ""] for m, v in study["models"].items()]
    pairs = grid(["pair", "difference [crossed 95%]", "df", P_FAMILY, "family", "verdict"],
                 [[pair_label(p), diff(v), fmt(v["df"], 1), test_p(v), v["family_text"], VERDICT_WORDS[v["verdict"]]]
                  for p, v in study["pairs"].items()])
    power = "; ".join(f"{FAMILY_NAMES.get(family, family)}: "
                      f"{f['chains_needed'] if f['chains_needed'] else 'more held-out problems than'} chains for "
                      f"{100 * f['effect']:.0f} points at level {fmt_p(f['alpha'])}"
                      for family, f in (study.get("power") or {}).items())
    hacking = "".join(f"\n- {sentence}" for sentence in study.get("hacking", {}).values())
    return (titled(study["source"], grid(["model", *(f"chain {s}: pass@1 (- SFT)" for s in order),
                                          "mean gain over SFT [crossed 95%: chains and problems]"], rows))
            + f"\n\n{pairs}"
            + (f"\n\nChains each family needs for 80% power (from these components): {power}." if power else "")
            + (f"\n\nReward hacking at the same chain seeds:{hacking}" if hacking else ""))


@table("losses", "losses")
def table_losses(ref, _):
    """Per loss variant its changes, confirmatory metric per seed and contrast; the secondary metrics; flagged runs."""
    losses = ref["losses"]
    metric, baseline, order = losses["metric"], losses["baseline"], [str(s) for s in losses["seeds"]]
    rows = []
    for name, v in losses["variants"].items():
        t = losses["versus"][metric].get(name)
        rows.append([f"`{name}`", "; ".join(f"`{f}` {c[0]} -> {c[1]}" for f, c in v["changes"].items())
                     or "(the baseline)", *(fmt(v["per_seed"].get(s)) for s in order),
                     f"{fmt(v['mean'])} [{fmt(v['crossed_low'])}, {fmt(v['crossed_high'])}]",
                     *([diff(t), fmt_p(t["p_holm"]), VERDICT_WORDS[t["verdict"]]] if t else ["", "", ""]),
                     ", ".join(v["flagged"]) or "none"])
    head = ["variant", f"what it changes against `{baseline}`", *(f"seed {s}" for s in order),
            "mean [crossed 95%: seeds and problems]", f"- {baseline} [simultaneous 95%]", "p (Dunnett-adjusted)",
            "verdict", "runs flagged"]
    secondary = [m for m in losses["metrics"] if m != metric]
    others = grid(["variant", *(f"{m} - {baseline} [simultaneous 95%]: verdict" for m in secondary)],
                  [[f"`{name}`", *(f"{diff(losses['versus'][m][name])}: {VERDICT_WORDS[losses['versus'][m][name]['verdict']]}"
                                   for m in secondary)] for name in losses["versus"][metric]])
    power = losses.get("power") or {}
    need = (f" The family would need {power['seeds_needed']} seeds to detect {100 * power['effect']:.0f} points at 80% "
            f"power (power now {fmt(power['power_now'], 2)})." if power.get("seeds_needed") else "")
    return (titled(losses["source"], f"{grid(head, rows)}\n\nFamily: {family_of(losses['versus'][metric])}.{need}",
                   f"; {metric} on {losses['problems']} held-out problems x {losses['samples']} samples, "
                   f"{len(order)} training seeds per variant")
            + (f"\n\nThe other metrics (secondary families, outside the plan's gate):\n\n{others}" if secondary else ""))


def crossed(v: dict) -> str:
    """'+0.238 [+0.153, +0.323], 4.5 df, p 0.0011: **higher**' (p adjusted in its family)."""
    return f"{diff(v)}, {fmt(v['df'], 1)} df, p {test_p(v)}: **{VERDICT_WORDS[v['verdict']]}**"


@table("chain-verdicts", "chain_study")
def table_chain_verdicts(ref, _):
    """What the chain study decides under the declared plan, family by family, in the order the plan tests them."""
    study = ref["chain_study"]
    by_family = {family: {p: v for p, v in study["pairs"].items() if v["family"] == family}
                 for family in ("primary", "vs_sft", "methods")}
    lines = [f"{provenance(study['source'])}; {len(study['seeds'])} chains (seeds "
             f"{', '.join(str(s) for s in study['seeds'])}), pass@1, the crossed analysis of chains and problems:", ""]
    for pair, v in by_family["primary"].items():
        gains = study["models"].get(pair.split(" - ")[0], {}).get("gain", {})
        lines.append(f"- **Primary comparison, {pair_label(pair)}** ({v['family_text']}): {crossed(v)}. Per chain: "
                     f"{', '.join(fmt(g, signed=True) for g in gains.values())} "
                     f"({sum(g > 0 for g in gains.values())} of {len(gains)} above 0).")
    for family in ("vs_sft", "methods"):
        tests = by_family[family]
        if not tests:
            continue
        resolved = sum(v["verdict"] in VERDICTS[:3] for v in tests.values())  # higher, lower, equivalent
        name = FAMILY_NAMES[family]
        head = f"- **{name[0].upper()}{name[1:]}** ({family_of(tests)}): resolved {resolved} of {len(tests)}"
        if all(v["verdict"] == "not_tested" for v in tests.values()):
            lines.append(f"{head}; none was tested: the family before it did not reject every pair.")
        else:
            lines += [f"{head}.", *(f"  - {pair_label(p)}: {crossed(v)}" for p, v in tests.items())]
    return "\n".join(lines)


@table("variance-sources", "chain_study", "seeds")
def table_variance_sources(ref, _):
    """Per method, pass@1's SD over chains, over training seeds on one chain, and over re-sampling one model."""
    study, seeds = ref["chain_study"], ref["seeds"]
    rows, ratios = [], {}
    for model, entry in study["models"].items():
        chain_sd, seed = statistics.stdev(entry["pass1"].values()), seeds["methods"].get(model)
        rows.append([label(model), f"{100 * chain_sd:.1f}",
                     *((f"{100 * seed[k]:.1f}" if seed else "-") for k in ("sd", "resampling_sd"))])
        if seed and seed["sd"] > 0:
            ratios[model] = chain_sd / seed["sd"]
    head = ["model", f"SD over {len(study['seeds'])} chains (points of pass@1)",
            f"SD over {len(seeds['seeds'])} training seeds, one chain", "re-sampling SD (one model sampled again)"]
    return (f"{provenance(study['source'])} and {titled(seeds['source'], grid(head, rows))}\n\n"
            f"SD over chains / SD over training seeds: {'; '.join(f'{label(m)} {r:.1f}x' for m, r in ratios.items())}. "
            f"The chain moves pass@1 more than the training seed for {sum(r > 1 for r in ratios.values())} of the "
            f"{len(ratios)} methods both studies trained.")


@table("tokenizer")
def table_tokenizer(_, elsewhere):
    """The tokenizer experiment kept in elsewhere.json: the same data, steps and seeds under each pre-tokenisation."""
    record = elsewhere.get("tokenizer")
    if not record:
        return "*No tokenizer experiment recorded.*"
    rows = [[f"`{words}`", fmt(v["tokens_per_text"], 1) if v.get("tokens_per_text") else "-",
             f"{v['facts_recalled']:.0%}", fmt(v["sft_greedy_unseen"], 2)] for words, v in record["runs"].items()]
    return f"{record['how']} ({record['cpu']}):\n\n" + grid(
        ["`base.tokenizer.words`", "tokens per text (relative)", "arithmetic facts the base recalls",
         "SFT greedy accuracy, unseen skeletons"], rows)


@table("pitfalls", "pitfalls")
def table_pitfalls(ref, _):
    pitfalls = ref["pitfalls"]
    rows = [[label(m), fmt_interval(v["pass@1"]), fmt(v["greedy"]["estimate"]),
             diff(pitfalls["vs_sft"][m]["pass@1"]) if m in pitfalls["vs_sft"] else ""]
            for m, v in pitfalls["models"].items()]
    return titled(pitfalls["source"], grid(["model", "pass@1", "greedy", "pass@1 - SFT"], rows))


def render_tables(ref: dict, elsewhere: dict, root: Path = REPO) -> dict[str, str]:
    """Every generated block by name: ``TABLES``, the memory plan, and docs/reference/gpu_check*.json."""
    paths = sorted((root / "docs" / "reference").glob("gpu_check*.json"))
    records = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    checks = [f"`{path.name}`: {r['machine']}, preset {r['preset']}, {r['precision']}"
              f"{', ' + r['weights'] if r.get('weights') else ''}, {r['wall_s']:.0f} s in all:\n\n"
              + gpu_check_table(r["stages"], r.get("memory", "torch.cuda.max_memory_allocated"))
              for path, r in zip(paths, records)]
    return {**{name: render(ref, elsewhere) for name, render in TABLES.items()},
            "memory-plan": markdown_table(stage_plans(real_config(root))),
            "gpu-check": "\n\n".join(checks) or "No `make gpu-check` record is kept here yet."}


BLOCK = re.compile(r"<!-- table:(?P<name>[\w-]+) -->\n(?P<body>.*?)\n?<!-- /table:(?P=name) -->", re.S)


def table_blocks(text: str) -> dict[str, str]:
    """{name: body} of every generated block in a markdown text; an opening marker never closed is an error."""
    blocks = {m["name"]: m["body"] for m in BLOCK.finditer(text)}
    unclosed = [name for name in re.findall(r"<!-- table:([\w-]+) -->", text) if name not in blocks]
    if unclosed:
        raise ValueError(f"<!-- table:{unclosed[0]} --> has no <!-- /table:{unclosed[0]} --> after it: close it")
    return blocks


def replace_tables(text: str, tables: dict[str, str]) -> str:
    """``text`` with each block's body replaced by ``tables[NAME]``; a block naming no table is an error."""
    table_blocks(text)

    def fill(m):
        if m["name"] not in tables:
            raise KeyError(f"no generated table named {m['name']!r}: one of {sorted(tables)}")
        return f"<!-- table:{m['name']} -->\n{tables[m['name']]}\n<!-- /table:{m['name']} -->"
    return BLOCK.sub(fill, text)


def stale_tables(text: str, tables: dict[str, str]) -> list[str]:
    """Names of the blocks whose body differs from ``tables``."""
    return [name for name, body in table_blocks(text).items() if tables.get(name) != body]


def pretty_key(key: str) -> str:
    """A flat summary key in words: 'main.models.sft.pass@1.estimate' -> 'SFT pass@1'."""
    part, *rest = key.removesuffix(".estimate").split(".")
    words = {("main", "models"): lambda: f"{label(rest[1])} {rest[2].replace('pass@n', 'pass@8')}",
             ("main", "vs_sft"): lambda: f"{label(rest[1])} - SFT, {rest[2]}",
             ("main", "pairs"): lambda: f"{pair_label(rest[1])}, {rest[2]}",
             ("passk", "comparisons"): lambda: f"passk: {pair_label(rest[1])} " + re.sub(r"^k=", "at k = ", rest[2]),
             ("passk", "models"): lambda: f"passk: {label(rest[1])} pass@{rest[2][2:]}",
             ("seeds", "methods"): lambda: f"seeds: {label(rest[1])} {' '.join(rest[2:])} pass@1",
             ("hacking", "runs"): lambda: f"hacking: {rest[1]} {rest[2].replace('_', ' ')}, {rest[3].replace('_', ' ')}"}
    return words.get((part, rest[0]), lambda: f"{part}: " + " ".join(r.replace("_", " ") for r in rest))()


# ----------------------------------------------------------------------------------------- the command line
def load_reference(directory: Path) -> tuple[dict, dict]:
    """The reference summaries {part: summary} and elsewhere.json (runs on other machines), the one reader of both."""
    parts = {part: read_json(directory / f"{part}.json") for part in PARTS if (directory / f"{part}.json").exists()}
    if "main" not in parts:
        sys.exit(f"no {directory / 'main.json'}: `make docs-reference` after `make run` writes it")
    elsewhere = directory / "elsewhere.json"
    return parts, read_json(elsewhere) if elsewhere.exists() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["render", "summarise", "compare"])
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
    tables = render_tables(parts, elsewhere)
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        if replace_tables(text, tables) != text:
            atomic_write_text(path, replace_tables(text, tables))
            print(f"updated {path.relative_to(REPO)}")


if __name__ == "__main__":
    main()
