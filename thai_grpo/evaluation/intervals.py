"""Confidence intervals for accuracy and pass@k (Wilson, problem-level bootstrap) and the paired bootstrap test."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

from thai_grpo.evaluation.passk import mean_pass_at_k

BOOTSTRAP_BATCH = 1000  # resamples held in memory at once: batch * num_problems floats


def _check_trials(successes: float, trials: int) -> None:
    if trials <= 0 or not 0 <= successes <= trials:
        raise ValueError(f"an interval needs at least one trial and 0 <= successes <= trials, got {successes}/{trials}")


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for integer counts, via scipy.stats.binomtest(...).proportion_ci."""
    _check_trials(successes, trials)
    ci = stats.binomtest(int(successes), int(trials)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def wilson_interval_fractional(successes: float, trials: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson interval for s (possibly fractional) successes in n trials, p = s/n, z = Phi^{-1}(1/2 + confidence/2):
    (p + z^2/(2n)) / (1 + z^2/n) +- z / (1 + z^2/n) sqrt(p (1 - p) / n + z^2 / (4 n^2)); 0 if s = 0, 1 if s = n."""
    _check_trials(successes, trials)
    z = stats.norm.ppf(0.5 + 0.5 * confidence)
    p = successes / trials
    shrink = 1.0 + z**2 / trials
    center = (p + z**2 / (2 * trials)) / shrink
    halfwidth = z / shrink * math.sqrt(max(p * (1 - p), 0.0) / trials + z**2 / (4 * trials**2))
    low = 0.0 if successes == 0 else max(0.0, center - halfwidth)
    high = 1.0 if successes == trials else min(1.0, center + halfwidth)
    return float(low), float(high)


def estimate_with_interval(successes: int, trials: int, confidence: float = 0.95) -> dict[str, float]:
    """{"estimate": s/n, "wilson_low", "wilson_high"} for s successes in n trials."""
    low, high = wilson_interval(successes, trials, confidence)
    return {"estimate": successes / trials, "wilson_low": low, "wilson_high": high}


def pass_at_k_with_interval(correct_counts: Sequence[int], n: int, k: int,
                            confidence: float = 0.95) -> dict[str, float]:
    """Mean unbiased pass@k over problems, with Wilson's interval over every sample (k = 1) or problem (k > 1): both
    approximations, as one problem's samples are correlated; ``bootstrap_interval`` over problems is the honest one."""
    estimate = mean_pass_at_k(correct_counts, n, k)
    trials = len(correct_counts) * n if k == 1 else len(correct_counts)
    successes = min(max(estimate * trials, 0.0), float(trials))  # guard float rounding
    low, high = wilson_interval_fractional(successes, trials, confidence)
    return {"estimate": estimate, "wilson_low": low, "wilson_high": high, "trials": trials}


def _bootstrap_mean(values: np.ndarray, confidence: float, n_boot: int, seed: int):
    """Problem-level percentile bootstrap of the mean (resample problems with replacement; at least 2)."""
    values = np.asarray(values, dtype=float).reshape(-1)
    return stats.bootstrap((values,), np.mean, n_resamples=n_boot, batch=BOOTSTRAP_BATCH, vectorized=True,
                           confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))


def bootstrap_interval(per_problem_values: Sequence[float], confidence: float = 0.95, n_boot: int = 10_000,
                       seed: int = 0) -> tuple[float, float]:
    """Seeded percentile bootstrap interval of the mean over problems (``n_boot`` resamples of the problems)."""
    ci = _bootstrap_mean(per_problem_values, confidence, n_boot, seed).confidence_interval
    return float(ci.low), float(ci.high)


def paired_bootstrap_test(values_a: Sequence[float], values_b: Sequence[float], n_boot: int = 10_000, seed: int = 0,
                          confidence: float = 0.95) -> dict[str, float]:
    """Seeded paired bootstrap of a - b on the same problems: ``mean_diff``, percentile interval and ``bootstrap_p``."""
    a, b = (np.asarray(values, dtype=float).reshape(-1) for values in (values_a, values_b))
    if a.shape != b.shape:
        raise ValueError(f"paired test needs the same problems: {a.size} vs {b.size} values")
    diffs = a - b
    mean_diff = float(diffs.mean())
    result = _bootstrap_mean(diffs, confidence, n_boot, seed)
    return {"mean_diff": mean_diff, "ci_low": float(result.confidence_interval.low),
            "ci_high": float(result.confidence_interval.high), **bootstrap_p(result.bootstrap_distribution, mean_diff)}


def bootstrap_p(draws, observed: float) -> dict:
    """Two-sided bootstrap p of ``observed`` from its ``draws`` shifted to the null (Davison & Hinkley 1997, eq. 4.11):
    p = (1 + count) / (B + 1), count = #{b: |d*_b - observed| >= |observed|}; ``p_at_floor`` when count = 0."""
    draws = np.asarray(draws, dtype=float).reshape(-1)
    count = int(np.count_nonzero(np.abs(draws - observed) >= abs(observed)))
    return {"p_value": (1 + count) / (draws.size + 1), "p_at_floor": count == 0, "n_resamples": int(draws.size)}
