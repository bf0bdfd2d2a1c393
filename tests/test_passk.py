"""Tests for thai_grpo.evaluation.passk against brute-force enumeration of k-subsets."""

from __future__ import annotations

from itertools import combinations
from math import comb

import pytest

from thai_grpo.evaluation.passk import mean_pass_at_k, pass_at_k, pass_at_k_curve


def naive_pass_at_k(n: int, c: int, k: int) -> float:
    """The plug-in pass@k = 1 - (1 - c/n)^k, which draws with replacement: the biased estimator the unbiased one
    replaces, C(n-c, k) / C(n, k) = prod_{i<k} (n-c-i)/(n-i) <= ((n-c)/n)^k."""
    return 1.0 - (1.0 - c / n) ** k


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    """Fraction of the k-subsets of n samples (first c correct) that contain a correct one."""
    subsets = list(combinations(range(n), k))
    return sum(any(i < c for i in subset) for subset in subsets) / len(subsets)


CASES = [(n, c, k) for n in range(1, 9) for c in range(n + 1) for k in range(1, n + 1)]


@pytest.mark.parametrize(("n", "c", "k"), CASES)
def test_matches_enumeration_and_naive_is_downward_biased(n, c, k):
    unbiased = pass_at_k(n, c, k)
    assert unbiased == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)
    assert unbiased == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)
    assert naive_pass_at_k(n, c, k) <= unbiased + 1e-12


def test_naive_underestimates_strictly_when_k_above_one():
    assert naive_pass_at_k(2, 1, 2) == 0.75 < pass_at_k(2, 1, 2) == 1.0
    assert naive_pass_at_k(8, 3, 1) == pytest.approx(pass_at_k(8, 3, 1))


def test_edge_values_and_stability():
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 6, 5) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert 0.0 < pass_at_k(10_000, 1, 1) < 1e-3
    assert pass_at_k(2000, 1000, 1000) == 1.0 - comb(1000, 1000) / comb(2000, 1000)


@pytest.mark.parametrize(("n", "c", "k"), [(4, 5, 1), (4, 1, 5), (4, -1, 1), (4, 1, -1), (0, 0, 0)])
def test_invalid_counts_raise(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_mean_and_curve():
    counts = [0, 2, 4]
    curve = pass_at_k_curve(counts, 4)
    assert len(curve) == 4
    assert curve[0] == pytest.approx((0 + 0.5 + 1) / 3)
    assert curve[1] == mean_pass_at_k(counts, 4, 2) == pytest.approx((0 + 5 / 6 + 1) / 3)
    assert curve == sorted(curve)
    assert curve[-1] == pytest.approx(2 / 3)
