"""pass@k: the chance one of k samples solves a problem, from n samples of which c are correct (Chen et al. 2021)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k)/C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i) (the stable form); 1.0 if n-c < k."""
    if n < 1 or not 0 <= c <= n or not 0 <= k <= n:
        raise ValueError(f"pass@k needs n >= 1 samples and 0 <= c, k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(correct_counts: Sequence[int], n: int, k: int) -> float:
    return float(np.mean([pass_at_k(n, int(c), k) for c in correct_counts]))


def pass_at_k_curve(correct_counts: Sequence[int], n: int) -> list[float]:
    return [mean_pass_at_k(correct_counts, n, k) for k in range(1, n + 1)]
