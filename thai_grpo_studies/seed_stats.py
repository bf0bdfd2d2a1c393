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
- ``previous_pairs``: the rule these verdicts replaced, kept beside them: every pair of methods, a two-level bootstrap
  (``two_level_means``) and Welch's t over the per-seed pass@1 (which drops the pairing by seed), both Holm-adjusted
  over the pairs, ``exceeds`` only when both reject.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

from thai_grpo.evaluation.intervals import bootstrap_p
from thai_grpo.evaluation.plan import analysis_plan, holm_adjust
from thai_grpo_studies.crossed import crossed_t_test
from thai_grpo_studies.many_to_one import apply_many_to_one, many_to_one
from thai_grpo_studies.power import crossed_power, units_needed

BASELINE = "grpo"  # every method of the seed study is compared with the chapter's GRPO at the same seeds
PREVIOUS_RULE = ("every pair of methods: two-level bootstrap over seeds and problems and Welch's t over the per-seed "
                 "values, both Holm-adjusted over the pairs; exceeds when both reject, within when the bootstrap does "
                 "not, unresolved when only the bootstrap does")


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


def two_level_means(groups: Sequence[np.ndarray], n_boot: int = 10_000, seed: int = 0) -> np.ndarray:
    """Bootstrap draws (n_boot x groups) of each group's mean over seeds of its mean over problems: problems drawn
    once per resample for all groups, seeds drawn per group, whole rows (the superseded rule's bootstrap)."""
    groups = [np.atleast_2d(np.asarray(g, dtype=float)) for g in groups]
    problems = {g.shape[1] for g in groups}
    if len(problems) != 1:
        raise ValueError(f"every method must be scored on the same held-out problems, got sizes {sorted(problems)}")
    num_problems = problems.pop()
    rng = np.random.default_rng(seed)
    problem_weights = rng.multinomial(num_problems, np.full(num_problems, 1 / num_problems), size=n_boot)
    draws = np.empty((n_boot, len(groups)))
    for index, runs in enumerate(groups):
        seeds = runs.shape[0]
        seed_weights = rng.multinomial(seeds, np.full(seeds, 1 / seeds), size=n_boot)
        draws[:, index] = np.einsum("bs,sp,bp->b", seed_weights, runs, problem_weights) / (seeds * num_problems)
    return draws


def percentile_test(draws: np.ndarray, observed: float, confidence: float = 0.95) -> dict:
    """Percentile interval of bootstrap ``draws`` of a difference, and the two-sided p of the draws shifted to the
    null, p = (1 + count) / (B + 1) (``intervals.bootstrap_p``)."""
    draws = np.asarray(draws, dtype=float)
    alpha = 1 - confidence
    low, high = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    return {"mean_diff": float(observed), "ci_low": float(low), "ci_high": float(high),
            **bootstrap_p(draws, observed)}


def seed_verdict(p_bootstrap: float, p_welch: float, alpha: float = 0.05) -> str:
    """The superseded rule: ``exceeds`` when the two-level bootstrap and Welch's t over seeds both reject
    (Holm-adjusted); ``within`` when the bootstrap does not; ``unresolved`` when only the bootstrap does."""
    if p_bootstrap >= alpha:
        return "within"
    return "exceeds" if p_welch < alpha else "unresolved"


def welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """Welch's two-sided p over the per-seed means of two seeds x problems matrices (1.0 where undefined)."""
    welch = stats.ttest_ind(a.mean(axis=1), b.mean(axis=1), equal_var=False)
    return float(welch.pvalue) if np.isfinite(welch.pvalue) else 1.0


def previous_pairs(runs: dict[str, np.ndarray], draws: np.ndarray, pairs: list[tuple[str, str]],
                   alpha: float = 0.05) -> list[dict]:
    """The superseded rule on ``pairs`` (a, b) of ``runs`` (seeds x problems; ``draws``: ``two_level_means`` in
    ``runs`` order): the two-level bootstrap of mean a - b and Welch's t, each Holm-adjusted over ``pairs``, and its
    verdict (``seed_verdict``)."""
    column = {m: i for i, m in enumerate(runs)}
    tests = []
    for a, b in pairs:
        observed = float(runs[a].mean() - runs[b].mean())
        tests.append({"a": a, "b": b, **percentile_test(draws[:, column[a]] - draws[:, column[b]], observed),
                      "welch_p": welch_p(runs[a], runs[b])})
    for test, p_boot, p_welch in zip(tests, holm_adjust([t["p_value"] for t in tests]),
                                     holm_adjust([t["welch_p"] for t in tests])):
        test.update(p_holm=p_boot, welch_p_holm=p_welch, correction=f"Holm over {len(tests)} pairs",
                    verdict=seed_verdict(p_boot, p_welch, alpha))
    return tests


def versus_baseline(matrices: dict[str, np.ndarray], baseline: str, metric: str, plan: dict,
                    confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0) -> list[dict]:
    """Every method of ``matrices`` (seeds x problems) but ``baseline`` against it under the plan: the pooled
    many-to-one contrasts (``many_to_one.many_to_one``) with the plan's family and verdict, each with the superseded
    rule's verdict for that pair (``previous``: Holm over these pairs)."""
    tests = apply_many_to_one(many_to_one(matrices, baseline, confidence, plan["equivalence_margin"]), plan, metric)
    draws = two_level_means(list(matrices.values()), n_boot, seed)
    old = previous_pairs(matrices, draws, [(t["a"], baseline) for t in tests], plan["alpha"])
    for test, before in zip(tests, old):
        test["previous"] = {key: before[key] for key in ("ci_low", "ci_high", "p_holm", "welch_p_holm", "correction",
                                                         "verdict", "p_at_floor", "n_resamples")}
    return tests


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


def seed_study(runs: dict[str, list[dict]], n_boot: int = 10_000, seed: int = 0, confidence: float = 0.95,
               plan: dict | None = None, baseline: str = BASELINE) -> dict:
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
    pairs = versus_baseline(matrices, baseline, "pass@1", plan, confidence, n_boot, seed)
    return {"methods": methods, "pairs": pairs, "baseline": baseline, "power": seeds_power(pairs, plan),
            "n_resamples": n_boot, "bootstrap_seed": seed, "confidence": confidence, "alpha": plan["alpha"],
            "plan": plan, "previous_rule": PREVIOUS_RULE}


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
