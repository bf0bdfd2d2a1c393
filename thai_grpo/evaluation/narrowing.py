"""The polish-or-create test: does the gap between two models' pass@k curves narrow at large k by more than the
ceiling pass@k <= 1 alone makes it narrow, even when every problem improved alike?"""

from __future__ import annotations

import numpy as np

from scipy import stats

from thai_grpo.evaluation.passk import pass_at_k


def null_gap(weaker_rates: np.ndarray, weaker_miss_k: np.ndarray, gap_at_1, k: int) -> np.ndarray:
    """The gap at k if every problem improved alike, q'_j = q_j + delta (1 - q_j), delta = g_1 / (1 - mean_j q_j):
    g0_k = mean_j (1 - q_j)^k (1 - (1 - delta)^k), with (1 - q_j)^k (``weaker_miss_k``) the unbiased 1 - pass@k_j (the
    plug-in (1 - c_j / n)^k is biased upward). Problems on the last axis, resamples on any leading ones."""
    room = 1.0 - np.asarray(weaker_rates, dtype=float).mean(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.minimum(np.where(room > 0, np.asarray(gap_at_1, dtype=float) / room, 0.0), 1.0)
    return np.mean(weaker_miss_k, axis=-1) * (1.0 - (1.0 - delta) ** k)


def narrowing_test(weaker_counts, stronger_counts, n: int, k: int, n_boot: int = 10_000, seed: int = 0,
                   confidence: float = 0.95) -> dict:
    """The gaps at 1 and ``k``, the null's g0_k, the excess narrowing g0_k - g_k with two-sided p and a normal interval
    excess +- z se from a paired bootstrap over problems (a percentile one would inherit the bias of the ratio delta),
    and the verdict: ``polish`` (interval above 0), ``create`` (below 0) or ``not_resolved``."""
    c_weak, c_strong = (np.asarray(c, dtype=int) for c in (weaker_counts, stronger_counts))
    if c_weak.shape != c_strong.shape or c_weak.ndim != 1 or c_weak.size < 2:
        raise ValueError("a narrowing test needs both models' correct counts on the same problems (at least 2)")
    if not 1 < k <= n:
        raise ValueError(f"the narrowing is read at a k in 2..n = {n}, got k = {k}")
    rate_weak, rate_strong = c_weak / n, c_strong / n
    weak_k = np.array([pass_at_k(n, int(c), k) for c in c_weak])
    at_k = np.array([pass_at_k(n, int(c), k) for c in c_strong]) - weak_k
    gap_1 = rate_strong - rate_weak

    def excess(index):
        return null_gap(rate_weak[index], 1.0 - weak_k[index], gap_1[index].mean(axis=-1), k) - \
            at_k[index].mean(axis=-1)

    observed = float(excess(np.arange(c_weak.size)))
    rng = np.random.default_rng(seed)
    draws = np.concatenate([excess(rng.integers(0, c_weak.size, size=(min(1000, n_boot - done), c_weak.size)))
                            for done in range(0, n_boot, 1000)])
    se = float(draws.std(ddof=1))
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    low, high = observed - z * se, observed + z * se
    p = float(2 * stats.norm.sf(abs(observed) / se)) if se > 0 else float(observed == 0)
    return {"k": k, "gap_at_1": float(gap_1.mean()), "gap_at_k": float(at_k.mean()),
            "null_gap_at_k": float(null_gap(rate_weak, 1.0 - weak_k, gap_1.mean(), k)), "excess_narrowing": observed,
            "se": se, "low": low, "high": high, "p_value": p, "n_resamples": int(draws.size), "confidence": confidence,
            "verdict": "polish" if low > 0 else "create" if high < 0 else "not_resolved"}
