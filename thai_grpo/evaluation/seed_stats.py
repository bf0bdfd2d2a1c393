"""Statistics of the seed study: how far held-out pass@1 moves with the training seed, and whether a difference
between two methods exceeds that noise.

Data: per method, a matrix X (seeds x problems) of per-problem solve rates c/n of each training run, all runs
scored on the same held-out problems, each with its own sampling seed (``core.seeds.sampling_seed``: with one shared
seed, similar models would draw mostly the same completions and the spread over seeds would miss most of the
evaluation noise).

- ``between_seed_interval``: Student's t interval of the mean over seeds, mean +- t_{(1+c)/2, s-1} sd / sqrt(s).
  With 3 seeds a percentile bootstrap over seeds cannot be used: it lies inside [min, max] of the seeds, and the
  mean of a symmetric distribution lies inside the range of 3 independent draws with probability 1 - 2 / 2^3 =
  0.75, so its coverage is at most 75% whatever its nominal level. The t interval is exact for normal seed
  scores (wide: t_{0.975, 2} = 4.30); with 3 seeds normality cannot be checked.
- ``resampling_sd``: the seed-to-seed spread pure evaluation noise would give: the standard deviation of pass@1 when
  the same model is sampled again on the same problems, sqrt(sum_j p_j (1 - p_j) / n) / P, estimated without bias by
  p_j (1 - p_j) / n ~ c_j (n - c_j) / (n^2 (n - 1)).
- ``within_run_se``: the standard error of one run's pass@1 over problems, sd_j(x_j) / sqrt(P) (the standard deviation
  a bootstrap over problems estimates). The report sets standard deviations side by side only: seed-to-seed SD,
  re-sampling SD and this SE, never an SD beside a 95% half-width (1.96 times larger).
- ``two_level_means``: a two-level (hierarchical) bootstrap. Each resample draws the P problems with replacement
  once (shared by every method: the held-out set is the same, so methods stay paired by problem), then, for each
  method separately (stratified by method: its runs are its own), draws its s seeds with replacement, whole rows:
  a run keeps its result on every problem, because one training run produced them all. The statistic is the mean
  over drawn seeds of the mean over drawn problems. Unlike rliable's ``StratifiedBootstrap`` (runs resampled
  independently per task), runs are not resampled per problem: in rliable each task's runs are separate trainings,
  here every problem is answered by the same trained model, and resampling a seed per problem would average the
  seed effect away. Resampling rows and columns of a crossed design is conservative for the problem level
  (McCullagh 2000), and anti-conservative for the seed level with few seeds (variance shrunk by (s - 1) / s and
  only C(2s - 1, s) distinct seed draws): ``seed_verdict`` therefore also asks Welch's t over the seeds.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

from thai_grpo.evaluation.scoring import holm_adjust


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
    once per resample for all groups, seeds drawn per group, whole rows (module docstring)."""
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
    null: p = mean(|d* - observed| >= |observed|) (as ``intervals.paired_bootstrap_test``)."""
    draws = np.asarray(draws, dtype=float)
    alpha = 1 - confidence
    low, high = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    return {"mean_diff": float(observed), "ci_low": float(low), "ci_high": float(high),
            "p_value": float(np.mean(np.abs(draws - observed) >= abs(observed))), "n_resamples": int(draws.size)}


def seed_pairwise_tests(runs: dict[str, np.ndarray], draws: np.ndarray, alpha: float = 0.05) -> list[dict]:
    """Every pair (a, b) of methods (a listed after b): the two-level bootstrap of mean pass@1 a - b (``draws``:
    ``two_level_means`` of the methods in ``runs`` order) and Welch's t over the per-seed pass@1, each
    Holm-adjusted over the pairs, and the verdict (``seed_verdict``)."""
    names = list(runs)
    column = {m: i for i, m in enumerate(names)}
    pairs = [(a, b) for i, b in enumerate(names) for a in names[i + 1:]]
    tests = []
    for a, b in pairs:
        observed = float(runs[a].mean() - runs[b].mean())
        welch = stats.ttest_ind(runs[a].mean(axis=1), runs[b].mean(axis=1), equal_var=False)
        tests.append({"a": a, "b": b, **percentile_test(draws[:, column[a]] - draws[:, column[b]], observed),
                      "welch_p": float(welch.pvalue) if np.isfinite(welch.pvalue) else 1.0})
    for test, p_boot, p_welch in zip(tests, holm_adjust([t["p_value"] for t in tests]),
                                     holm_adjust([t["welch_p"] for t in tests])):
        test.update(p_holm=p_boot, welch_p_holm=p_welch, correction=f"Holm over {len(tests)} pairs",
                    verdict=seed_verdict(p_boot, p_welch, alpha))
    return tests


def seed_verdict(p_bootstrap: float, p_welch: float, alpha: float = 0.05) -> str:
    """``exceeds``: the two-level bootstrap and Welch's t over seeds both reject no difference (Holm-adjusted);
    ``within``: the bootstrap does not; ``unresolved``: the bootstrap does, Welch's t (few seeds) does not."""
    if p_bootstrap >= alpha:
        return "within"
    return "exceeds" if p_welch < alpha else "unresolved"


def seed_study(runs: dict[str, list[dict]], n_boot: int = 10_000, seed: int = 0, confidence: float = 0.95,
               alpha: float = 0.05) -> dict:
    """results/seeds/results.json from ``runs``: per method, its runs as {"run", "seed", "scores"} (scores.json
    of each run, same held-out problems; optionally its ``sampling_seed``). Per method: pass@1 per seed with its
    within-run problem-bootstrap interval, standard error over problems and resampling spread, the between-seed t interval, the two-level bootstrap interval; then every
    pair of methods (``seed_pairwise_tests``)."""
    from thai_grpo.evaluation.scoring import per_problem_values

    matrices = {m: np.stack([per_problem_values(r["scores"], "pass@1") for r in rs]) for m, rs in runs.items()}
    draws = two_level_means(list(matrices.values()), n_boot, seed)
    alpha_ci = 1 - confidence
    methods = {}
    for index, (method, method_runs) in enumerate(runs.items()):
        per_seed = [{"run": r["run"], "seed": r["seed"], "sampling_seed": r.get("sampling_seed"),
                     **{key: r["scores"]["pass@1"][key] for key in ("estimate", "bootstrap_low", "bootstrap_high")},
                     "resampling_sd": resampling_sd(r["scores"]["per_problem_correct"], r["scores"]["n_samples"]),
                     "within_run_se": within_run_se(row)}
                    for r, row in zip(method_runs, matrices[method])]
        low, high = np.quantile(draws[:, index], [alpha_ci / 2, 1 - alpha_ci / 2])
        methods[method] = {
            "runs": per_seed,
            "between_seed": between_seed_interval([r["estimate"] for r in per_seed], confidence),
            "two_level": {"low": float(low), "high": float(high)},
            "within_run_se": float(np.sqrt(np.mean([r["within_run_se"] ** 2 for r in per_seed]))),
            "resampling_sd": float(np.sqrt(np.mean([r["resampling_sd"] ** 2 for r in per_seed]))),
        }
    return {"methods": methods, "pairs": seed_pairwise_tests(matrices, draws, alpha), "n_resamples": n_boot,
            "bootstrap_seed": seed, "confidence": confidence, "alpha": alpha}
