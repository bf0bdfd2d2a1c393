"""Statistics of the seed study: how far held-out pass@1 moves with the training seed, and whether a method differs
from ``grpo`` by more than that noise.

Data: per method, a matrix X (seeds x problems) of per-problem solve rates c/n of each training run, all runs
scored on the same held-out problems. The run at training seed s samples with sampling seed s' (``core.seeds.
sampling_seed``), the same s' for every method: runs at one training seed share their random numbers (a block), runs
at different seeds do not (with one seed for all, the spread over seeds would miss most of the evaluation noise).

- ``between_seed_interval``: Student's t interval of the mean over seeds, mean +- t_{(1+c)/2, s-1} sd / sqrt(s)
  (descriptive, per method: the problems fixed). With 3 seeds a percentile bootstrap over seeds cannot be used: it
  lies inside [min, max] of the seeds, which holds the mean of a symmetric distribution with probability
  1 - 2 / 2^3 = 0.75 at most.
- ``crossed.crossed_t_test`` of a method's seeds x problems matrix: the interval of its mean over seeds and problems,
  with the seed and problem variance in one standard error.
- ``resampling_sd``: the seed-to-seed spread pure evaluation noise would give: the standard deviation of pass@1 when
  the same model is sampled again on the same problems, sqrt(sum_j p_j (1 - p_j) / n) / P, estimated without bias by
  p_j (1 - p_j) / n ~ c_j (n - c_j) / (n^2 (n - 1)).
- ``within_run_se``: the standard error of one run's pass@1 over problems, sd_j(x_j) / sqrt(P). The report sets
  standard deviations side by side only: seed-to-seed SD, re-sampling SD and this SE.
- Pairs: every method against ``grpo`` (``many_to_one.many_to_one``): seed as block (the pairing by seed kept), the
  method x seed and method x problem variance pooled over the methods, Dunnett's many-to-one p and simultaneous
  intervals; the declared plan gives the verdicts (``many_to_one.apply_many_to_one``).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

from thai_grpo.evaluation.plan import analysis_plan
from thai_grpo_studies.crossed import crossed_t_test
from thai_grpo_studies.many_to_one import apply_many_to_one, many_to_one
from thai_grpo_studies.power import crossed_power, units_needed

BASELINE = "grpo"  # every method of the seed study is compared with the chapter's GRPO at the same seeds


def between_seed_interval(values: Sequence[float], confidence: float = 0.95) -> dict:
    """Mean over seeds, the seeds' standard deviation (ddof 1) and Student's t interval of the mean."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        raise ValueError(f"a between-seed interval needs at least 2 seeds, got {x.size}: list more in seeds.training")
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1)) * sd / math.sqrt(x.size)
    return {"mean": mean, "sd": sd, "t_low": mean - half, "t_high": mean + half, "seeds": int(x.size),
            "confidence": confidence}


def resampling_sd(counts: Sequence[int], n: int) -> float:
    """Unbiased-variance estimate of pass@1's standard deviation across re-samplings of one model on the same
    problems: sqrt(sum_j c_j (n - c_j) / (n^2 (n - 1))) / P (module docstring)."""
    c = np.asarray(counts, dtype=float)
    if n < 2:
        raise ValueError(f"the resampling spread needs n >= 2 samples per problem, got n={n}")
    return float(math.sqrt(np.sum(c * (n - c)) / (n * n * (n - 1))) / c.size)


def within_run_se(values: Sequence[float]) -> float:
    """Standard error of a mean over problems: sd(values, ddof 1) / sqrt(P)."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        raise ValueError(f"a standard error over problems needs at least 2 problems, got {x.size}")
    return float(x.std(ddof=1) / math.sqrt(x.size))


def versus_baseline(matrices: dict[str, np.ndarray], baseline: str, metric: str, plan: dict,
                    confidence: float = 0.95) -> list[dict]:
    """Every method of ``matrices`` (seeds x problems) but ``baseline`` against it under the plan: the pooled
    many-to-one contrasts (``many_to_one.many_to_one``) with the plan's family and verdict."""
    return apply_many_to_one(many_to_one(matrices, baseline, confidence, plan["equivalence_margin"]), plan, metric)


def seeds_power(tests: list[dict], plan: dict) -> dict:
    """How many training seeds the many-to-one family needs to detect the plan's ``methods`` effect at its target
    power, from the pooled components (contrast variance 2 x the crossed one; level alpha / contrasts)."""
    if not tests:
        return {}
    t = tests[0]
    components = {"chain": t["components"]["seed"], "problem": t["components"]["problem"],
                  "residual": t["components"]["residual"]}
    effect, alpha, target = plan["power"]["effects"]["methods"], plan["alpha"] / len(tests), plan["power"]["target"]
    return {"effect": effect, "alpha": alpha, "target": target, "contrasts": len(tests), "seeds": t["seeds"],
            "power_now": crossed_power(components, t["seeds"], t["problems"], effect, alpha, contrast=2.0),
            "seeds_needed": units_needed(components, t["problems"], effect, alpha, target, contrast=2.0)}


def seed_study(runs: dict[str, list[dict]], confidence: float = 0.95, plan: dict | None = None,
               baseline: str = BASELINE) -> dict:
    """results/seeds/results.json from ``runs``: per method, its runs as {"run", "seed", "scores"} (scores.json
    of each run, same held-out problems; optionally its ``sampling_seed``). Per method: pass@1 per seed with its
    within-run problem-bootstrap interval, standard error over problems and resampling spread, the between-seed t
    interval and the crossed interval of its mean; then every method against ``baseline`` (``versus_baseline``) and
    the seeds the family needs (``seeds_power``)."""
    from thai_grpo.evaluation.scoring import per_problem_values

    plan = plan or analysis_plan(None)
    check_seed_lists(runs, baseline)
    matrices = {m: np.stack([per_problem_values(r["scores"], "pass@1") for r in rs]) for m, rs in runs.items()}
    methods = {}
    for method, method_runs in runs.items():
        per_seed = [{"run": r["run"], "seed": r["seed"], "sampling_seed": r.get("sampling_seed"),
                     **{key: r["scores"]["pass@1"][key] for key in ("estimate", "bootstrap_low", "bootstrap_high")},
                     "resampling_sd": resampling_sd(r["scores"]["per_problem_correct"], r["scores"]["n_samples"]),
                     "within_run_se": within_run_se(row)}
                    for r, row in zip(method_runs, matrices[method])]
        crossed = crossed_t_test(matrices[method], confidence)
        methods[method] = {
            "runs": per_seed,
            "between_seed": between_seed_interval([r["estimate"] for r in per_seed], confidence),
            "crossed": {"low": crossed["ci_low"], "high": crossed["ci_high"], "se": crossed["se"], "df": crossed["df"]},
            "within_run_se": float(np.sqrt(np.mean([r["within_run_se"] ** 2 for r in per_seed]))),
            "resampling_sd": float(np.sqrt(np.mean([r["resampling_sd"] ** 2 for r in per_seed]))),
        }
    pairs = versus_baseline(matrices, baseline, "pass@1", plan, confidence)
    return {"methods": methods, "pairs": pairs, "baseline": baseline, "power": seeds_power(pairs, plan),
            "confidence": confidence, "alpha": plan["alpha"], "plan": plan}


def check_seed_lists(runs: dict[str, list[dict]], baseline: str) -> None:
    """ValueError naming the fix unless ``baseline`` is there and every method has runs at exactly its training
    seeds, in the same order (the pairing by seed needs one run per method per seed)."""
    if baseline not in runs:
        raise ValueError(f"the study compares every method with {baseline!r} at the same seeds; got only {sorted(runs)}")
    seeds = [r["seed"] for r in runs[baseline]]
    for name, method_runs in runs.items():
        own = [r["seed"] for r in method_runs]
        if own != seeds:
            raise ValueError(f"{name}: runs at seeds {own}, {baseline} at {seeds}: every method needs one run at each "
                             "training seed, in the same order (seeds.training)")
    if len(seeds) < 2:
        raise ValueError(f"a seed study needs at least 2 training seeds, got {len(seeds)}: list more in seeds.training")


def seed_costs(seconds: dict, runs: list[str], variants: list[str]) -> dict:
    """Wall seconds (Snakemake benchmarks) of the train, sample and score stages of the runs the seed study adds
    (not the default seed's runs, which `snakemake` builds), per stage kind and in all."""
    added = [run for run in runs if run not in variants]
    stages = {f"{kind}-{run}": seconds[f"{kind}-{run}"] for run in added for kind in ("train", "sample", "score")
              if f"{kind}-{run}" in seconds}
    per_kind = {kind: sum(s for stage, s in stages.items() if stage.split("-", 1)[0] == kind)
                for kind in ("train", "sample", "score")}
    return {"runs_added": added, "stages": stages, "per_kind": per_kind, "sum_seconds": sum(stages.values())}
