"""The numbers in README.md and docs/, generated so that they cannot go stale.

Three steps, each a pure function of JSON documents:

* ``summarise_*``: a run's ``results/`` JSON files (the main run, and the optional targets' where present) ->
  small summaries (a few hundred numbers, 4 decimals) stored under ``docs/reference/`` with the commit, command and
  CPU they came from (``make docs-reference``).
* ``thai_grpo_tools.reference_tables``: the summaries -> the markdown tables between ``<!-- table:NAME -->`` and
  ``<!-- /table:NAME -->`` in README.md and docs/*.md (``make docs``).
* ``compare``: a user's own summaries against the reference: which numbers differ, by how much, and whether the
  difference lies within the spread seen between whole runs of the pipeline (``spread``, from the runs kept as
  numbers in ``docs/reference/elsewhere.json`` plus the reference itself).
"""

from __future__ import annotations

import re

import numpy as np

from thai_grpo.report.plan_words import family_text
from thai_grpo.report.verdicts import oriented
from thai_grpo_studies.hacking_words import hacking_outcome

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
DIGITS = 4


def _r(value):
    """A number rounded to DIGITS decimals (ints and None unchanged)."""
    return round(float(value), DIGITS) if isinstance(value, float) else value


def _p(value):
    """A p-value to two significant figures: a p far below 0.0001 stays above 0 (rounding decimals would make it 0)."""
    return float(f"{value:.2g}") if isinstance(value, float) else value


def _interval(record: dict, estimate="estimate", low="bootstrap_low", high="bootstrap_high") -> dict:
    return {"estimate": _r(record[estimate]), "low": _r(record[low]), "high": _r(record[high])}


def _largest_k(scores: dict) -> str:
    return max((key for key in scores if re.fullmatch(r"pass@\d+", key)), key=lambda key: int(key[5:]))


def _test(test: dict, flip: bool = False) -> dict:
    """One pairwise test in 4 decimals, read the other way round when ``flip`` (its verdict turned with the pair),
    with its family and whether its p is a bootstrap's floor."""
    turned = oriented(test, test["b"]) if flip else test
    return {"diff": _r(turned["mean_diff"]), "low": _r(turned["ci_low"]), "high": _r(turned["ci_high"]),
            "p": _p(test["p_value"]), "n_resamples": test.get("n_resamples"), "p_holm": _p(test["p_holm"]),
            "p_at_floor": bool(test.get("p_at_floor")), "verdict": turned["verdict"],
            "family": test["family"], "family_text": family_text(test)}


def pair_test(pairwise: list[dict], a: str, b: str, metric: str) -> dict | None:
    """The Holm-family test of ``a - b`` on ``metric`` from results.json's ``comparison.pairwise``, whichever way
    round it was stored (a stored ``b - a`` is negated, its interval mirrored)."""
    for test in pairwise:
        if test["metric"] == metric and {test["a"], test["b"]} == {a, b}:
            return _test(test, flip=test["a"] != a)
    return None


def _thirds(values: list) -> list:
    values = np.array([np.nan if v is None else v for v in values], dtype=float)
    window = max(1, values.size // 3)
    parts = (values[:window], values[-window:])
    return [_r(float(np.nanmean(p))) if np.isfinite(p).any() else None for p in parts]


def summarise_scores(results: dict) -> dict:
    """Per model: pass@1 (bootstrap and Wilson intervals), pass@n and greedy accuracy; per trained model, its
    pass@1 and greedy difference from SFT in the Holm family of all pairs (``pair_test``); every other pair."""
    pairwise = results["comparison"]["pairwise"]
    models = {}
    for name, scores in results["eval"].items():
        largest = _largest_k(scores)
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
    """The main run (results/results.json): scores and tests (``summarise_scores``), each trained run's rollout
    accuracy and KL (first -> last third of its steps) and health flags, the k1/k3 study on real tokens, PPO's
    reward model, and each method's training cost."""
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
    """pass@k to k = n (results/passk/results.json): each model at k = 1, 8 and n, and per pair the difference at
    those k, where its verdict changes (``thai_grpo_studies.large_k.crossing``) and the problems created and lost."""
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
    """A many-to-one family's power over training seeds (``seed_stats.seeds_power``), in 4 decimals."""
    return {key: _r(power.get(key)) for key in ("effect", "alpha", "power_now", "seeds_needed", "seeds")}


def summarise_seeds(seeds: dict) -> dict:
    """The seed study (results/seeds/results.json): per method pass@1 per training seed, the between-seed mean, t
    interval and SD, the re-sampling SD and the within-run SE (standard deviations side by side) and the crossed
    interval; per contrast against the baseline the difference, its simultaneous interval, Dunnett p, family and
    verdict; the seeds the family needs."""
    methods = {m: {"per_seed": {str(r["seed"]): _r(r["estimate"]) for r in s["runs"]},
                   "mean": _r(s["between_seed"]["mean"]), "t_low": _r(s["between_seed"]["t_low"]),
                   "t_high": _r(s["between_seed"]["t_high"]), "sd": _r(s["between_seed"]["sd"]),
                   "crossed_low": _r(s["crossed"]["low"]), "crossed_high": _r(s["crossed"]["high"]),
                   "resampling_sd": _r(s["resampling_sd"]), "within_run_se": _r(s["within_run_se"])}
               for m, s in seeds["methods"].items()}
    pairs = {f"{p['a']} - {p['b']}": {"diff": _r(p["mean_diff"]), "low": _r(p["ci_low"]), "high": _r(p["ci_high"]),
                                      "p": _p(p["p_value"]), "p_holm": _p(p["p_holm"]), "df": _r(p["df"]),
                                      "verdict": p["verdict"], "family_text": family_text(p)}
             for p in seeds["pairs"]}
    power = seeds.get("power") or {}
    return {"seeds": seeds["training_seeds"], "methods": methods, "pairs": pairs,
            "power": _seed_power(power)}


def summarise_hacking(hacking: dict) -> dict:
    """The reward-hacking runs (results/hacking/results.json): per run each curve at step 1 and over the last third,
    the empty-think peak and its step (an episode in mid-run shows there, not in the last third), and the flag."""
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
    """The chain study (results/chains/results.json): per model pass@1 per chain and, for the methods, the gain over
    the chain's SFT per chain and its mean with the crossed interval; per pair of pass@1 the difference, its crossed
    interval and degrees of freedom, the p adjusted in its family, the family and the verdict; per family of the plan
    the chains it needs; the sampling seeds and the hacking runs per variant."""
    models = {}
    for model, entry in study["models"].items():
        row = {"pass1": {str(c["seed"]): _r(c["pass@1"]["estimate"]) for c in entry["chains"]}}
        if "gain_over_sft" in entry:
            gain = entry["gain_over_sft"]
            row["gain"] = {str(c["seed"]): _r(c["gain_over_sft"]["estimate"]) for c in entry["chains"]}
            row["gain_mean"] = {"diff": _r(gain["mean"]), "low": _r(gain["low"]), "high": _r(gain["high"]),
                                "df": _r(gain["df"])}
        models[model] = row
    pairs = {f"{p['a']} - {p['b']}": {"diff": _r(p["mean_diff"]), "low": _r(p["ci_low"]), "high": _r(p["ci_high"]),
                                      "df": _r(p["df"]), "p": _p(p["p_value"]), "p_holm": _p(p["p_holm"]),
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
    """The loss-family study (results/losses/results.json): per variant what it changes, its pass@1 per training seed,
    the between-seed mean with the crossed interval (seeds and problems), its flagged runs and the seconds of its jobs;
    per metric each variant against the baseline (difference, simultaneous interval, Dunnett p, verdict, family);
    the seeds the confirmatory family needs."""
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
    versus = {m: {t["variant"]: {"diff": _r(t["mean_diff"]), "low": _r(t["ci_low"]), "high": _r(t["ci_high"]),
                                 "p_holm": _p(t["p_holm"]), "verdict": t["verdict"], "family_text": family_text(t)}
                  for t in tests} for m, tests in losses["versus"].items()}
    power = losses.get("power") or {}
    return {"baseline": losses["baseline"], "seeds": losses["training_seeds"], "metric": metric,
            "metrics": losses["metrics"], "problems": losses["num_problems"], "samples": losses["n_samples"],
            "variants": variants, "versus": versus,
            "power": _seed_power(power)}


def summarise_pitfalls(results: dict) -> dict:
    """The pitfalls report's run (results/pitfalls/results.json): its models' scores and tests against SFT."""
    scores = summarise_scores(results)
    return {"models": scores["models"], "vs_sft": scores["vs_sft"]}


REWARD_PARTS = ("correct", "format", "thai", "total")


def example_problem(samples: dict[str, list[dict]], before: str = "sft", after: str = "grpo") -> dict | None:
    """One held-out problem to show, with each model's greedy answer and its reward breakdown: the first (in the
    held-out order) that ``after`` answers right and ``before`` wrong, else the first ``after`` answers right.
    ``samples``: {model: its results/eval/<model>/samples.jsonl records}."""
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
    """`make bench` (results/bench/bench.json): each method's step and held-out sampling split into parts (seconds,
    at the threads the pipeline gives each), and the last run projected onto other CPUs."""
    def split(record: dict) -> dict:
        return {"threads": record.get("threads"), "seconds": {k: _r(v) for k, v in record["seconds"].items()}}

    def threads(record: dict) -> str:
        return f"{record['threads']} thread{'s' if record['threads'] > 1 else ''}"

    steps = {}
    for record in bench.get("grpo_step", []):
        steps[f"GRPO ({threads(record)})"] = split(record)
    for key, name in (("dr_grpo_step", "Dr.GRPO"), ("ppo_step", "PPO"), ("dpo_step", "DPO")):
        if bench.get(key):
            steps[name] = split(bench[key])
    for record in bench.get("heldout_sampling", []):
        steps[f"held-out sampling, {record['problems']} problems ({threads(record)})"] = split(record)
    return {"cpu": bench.get("cpu"), "steps": steps,
            "other_cpus": [{k: _r(v) if isinstance(v, float) else v for k, v in row.items()}
                           for row in bench.get("other_cpus", [])]}


SUMMARISERS = {"main": summarise_main, "passk": summarise_passk, "seeds": summarise_seeds,
               "hacking": summarise_hacking, "losses": summarise_losses, "pitfalls": summarise_pitfalls,
               "chain_study": summarise_chain_study,
               "bench": summarise_bench}


def stage_span(stages: dict[str, tuple[float, float]]) -> float | None:
    """Wall seconds from the first job's start to the last job's end; ``stages``: {stem: (end time, seconds)}
    (a benchmark file's modification time and its ``s`` column)."""
    if not stages:
        return None
    return max(end for end, _ in stages.values()) - min(end - s for end, s in stages.values())


def target_stages(part: str, stems: list[str]) -> list[str]:
    """The benchmark stems of an optional target's jobs (``TARGET_STAGES``); for seeds also the retrained runs'
    train, sample and score jobs (``<variant>-seed<N>``), for pitfalls the pitfall variants' (not in the main run)."""
    prefixes = TARGET_STAGES.get(part, ())
    chosen = [s for s in stems if s.startswith(prefixes)]
    if part == "seeds":
        chosen += [s for s in stems if re.fullmatch(r"(train|sample|score)-.+-seed\d+", s)]
    return sorted(set(chosen))


def study_job_seconds(part: str, data: dict) -> float | None:
    """The seconds of a study's own jobs, summed, as its results record them (None where they do not): what the
    study costs a run that already has the main run's models, whatever else ran beside it."""
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
    """The main run's benchmark stems: results.json's ``run.benchmarks`` without an optional target's jobs that
    ran before it (their files share the folder)."""
    optional = tuple(prefix for prefixes in TARGET_STAGES.values() for prefix in prefixes)
    return [stem for stem in results["run"]["benchmarks"] if not stem.startswith(optional)]


def source(part: str, commit: str, cpu: str, cores: int, wall_seconds: float | None, jobs_seconds: float | None,
           date: str, note: str | None = None) -> dict:
    """Where a summary came from: the command, the commit it ran at, the CPU (``lscpu`` model name, cores) and date,
    its wall time (``time`` or the jobs' span) and the sum of its jobs' seconds (None: not measured, ``note`` says
    why), and a note on how it was run."""
    return {"command": PARTS[part][1], "results": f"results/{PARTS[part][0]}", "commit": commit, "cpu": cpu,
            "cores": cores, "wall_seconds": _r(wall_seconds), "jobs_seconds": _r(jobs_seconds), "date": date,
            "note": note}


# ---- comparing a run with the reference -----------------------------------------------------------------------

def provenance(src: dict) -> str:
    return f"`{src['command']}` at commit {src['commit']} on {src['cpu']}, {src['cores']} cores, {src['date']}"


def chain_rows(ref: dict, elsewhere: dict) -> list[dict]:
    """The runs of the whole chain (base -> SFT -> methods) the docs know: those kept as numbers in elsewhere.json,
    the reference chain study's other chains (their pass@1 and gains over SFT) and the reference run itself, each
    {"cpu", "command", "values": {flat key: number}}."""
    main = ref["main"]
    kept = {k for chain in elsewhere.get("chains", []) for k in chain["values"]}
    values = {key: value for key, value in flatten(ref).items() if key in kept}
    own = {"cpu": f"{main['source']['cpu']}, {main['source']['cores']} cores", "command": main["source"]["command"],
           "note": "the reference run", "values": values}
    return [*elsewhere.get("chains", []), *study_chains(ref.get("chain_study")), own]


def study_chains(study: dict | None) -> list[dict]:
    """The chains of a chain study summary but the reference run's own (seed 42's is the reference run)."""
    if not study:
        return []
    src, rows = study["source"], []
    for seed in (str(s) for s in study["seeds"]):
        if seed == str(study.get("default_seed", 42)):
            continue
        values = {f"main.models.{m}.pass@1.estimate": v["pass1"][seed] for m, v in study["models"].items()
                  if seed in v["pass1"]}
        values.update({f"main.vs_sft.{m}.pass@1.diff": v["gain"][seed] for m, v in study["models"].items()
                       if seed in v.get("gain", {})})
        rows.append({"cpu": f"{src['cpu']}, {src['cores']} cores", "command": src["command"],
                     "note": f"chain seed {seed} of the reference chain study", "values": values})
    return rows


def spread(chains: list[dict]) -> dict[str, dict]:
    """Per flat key present in at least two chains: how many, their min, max and range (max - min)."""
    keys = dict.fromkeys(k for chain in chains for k in chain["values"])
    out = {}
    for key in keys:
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


def compare(reference: dict, own: dict, spreads: dict[str, dict]) -> list[dict]:
    """Every number of the reference summaries also in ``own`` ({part: summary}) that differs: reference, own,
    difference (ratio for seconds and memory), and, where ``spreads`` (``spread``) has the key, whether the
    difference is within the largest difference seen between two whole runs."""
    ref_flat = flatten({p: s for p, s in reference.items() if p in own})
    own_flat = flatten(own)
    rows = []
    for key, ref_value in ref_flat.items():
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


def is_cost(key: str) -> bool:
    """Times and memory: they differ between machines and runs without the results differing."""
    return bool(re.search(r"seconds|memory_mb", key))


def compare_report(rows: list[dict], reference: dict, own: dict, show_all: bool = False) -> str:
    """The differences as text: the sources side by side; each differing result number with a stated spread or in
    the headline (models, vs_sft), the rest counted (all with ``show_all``); times and memory as one median ratio."""
    lines = []
    for part in reference:
        if part in own:
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
        outside = sum(1 for r in results if r.get("within") is False)
        hidden = len(results) - len(shown)
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


def wall_from_time_output(text: str) -> float | None:
    """Wall seconds from the output of bash's ``time`` (``real 11m52.123s``) or GNU time (``0:11:52elapsed``,
    ``11:52.12elapsed``, or ``Elapsed (wall clock) time ...: 11:52.12``); None when neither is there."""
    match = re.search(r"real\s+(?:(\d+)h)?(\d+)m([\d.]+)s", text)
    if match:
        hours, minutes, seconds = match.groups()
        return int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)
    match = re.search(r"(?:([\d:.]+)elapsed|Elapsed \(wall clock\) time[^:]*:\s*([\d:.]+))", text)
    if match:
        parts = [float(p) for p in (match.group(1) or match.group(2)).split(":")]
        return sum(value * 60 ** power for power, value in enumerate(reversed(parts)))
    return None
