"""pass@k: the chance one of k samples solves a problem, from n samples of which c are correct (Chen et al. 2021)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def _check_counts(n: int, c: int, k: int) -> None:
    if n < 1:
        raise ValueError(f"n must be at least 1 sample, got n={n}")
    if c < 0 or k < 0:
        raise ValueError(f"n, c and k must be non-negative, got n={n}, c={c}, k={k}")
    if c > n:
        raise ValueError(f"c={c} correct samples exceeds n={n} samples")
    if k > n:
        raise ValueError(f"k={k} exceeds n={n} samples")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k)/C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i) (the stable form); 1.0 if n-c < k."""
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(correct_counts: Sequence[int], n: int, k: int) -> float:
    if len(correct_counts) == 0:
        raise ValueError("correct_counts is empty")
    return float(np.mean([pass_at_k(n, int(c), k) for c in correct_counts]))


def pass_at_k_curve(correct_counts: Sequence[int], n: int) -> list[float]:
    return [mean_pass_at_k(correct_counts, n, k) for k in range(1, n + 1)]
