"""Polish versus create at large k: curves with bands, crossings and created/lost, against brute force."""

from itertools import combinations
from math import comb

import numpy as np
import pytest

from thai_grpo_studies.large_k import (bootstrap_indices, created_and_lost, crossing, curve_band, large_k_results,
                                          pass_at_k_matrix)


def test_pass_at_k_matrix_is_the_subset_enumeration():
    n, counts = 6, [0, 1, 3, 6]
    matrix = pass_at_k_matrix(counts, n)
    for row, c in enumerate(counts):
        samples = [1] * c + [0] * (n - c)
        for k in range(1, n + 1):  # share of the k-subsets holding at least one correct sample
            subsets = list(combinations(samples, k))
            assert matrix[row, k - 1] == pytest.approx(sum(map(any, subsets)) / comb(n, k))


def test_curve_band_is_the_percentile_of_resampled_means():
    rng = np.random.default_rng(3)
    matrix = rng.random((12, 5))
    indices = bootstrap_indices(12, 400, seed=1)
    band = curve_band(matrix, indices)
    brute = np.array([[np.mean([matrix[i, k] for i in rows]) for k in range(5)] for rows in indices])
    assert band["mean"] == pytest.approx(matrix.mean(axis=0).tolist())
    assert band["low"] == pytest.approx(np.percentile(brute, 2.5, axis=0).tolist())
    assert band["high"] == pytest.approx(np.percentile(brute, 97.5, axis=0).tolist())
    assert all(low <= mean <= high for low, mean, high in zip(band["low"], band["mean"], band["high"]))


def test_bootstrap_indices_are_seeded_and_refuse_one_problem():
    assert (bootstrap_indices(7, 5, 0) == bootstrap_indices(7, 5, 0)).all()
    with pytest.raises(ValueError, match="2 problems"):
        bootstrap_indices(1, 5, 0)


def _brute_crossing(mean, low, high):
    lead = 1 if low[0] > 0 else -1 if high[0] < 0 else 0
    sign = np.sign(mean[0])
    result = {"lead_at_1": lead, "first_k_includes_zero": 1 if not lead else None, "first_k_reversed": None,
              "k_reversed": [], "includes_zero_at_n": bool(low[-1] <= 0 <= high[-1]), "first_k_sign_flip": None}
    for k in range(1, len(mean) + 1):
        m, lo, hi = mean[k - 1], low[k - 1], high[k - 1]
        if lead and result["first_k_includes_zero"] is None and lo <= 0 <= hi:
            result["first_k_includes_zero"] = k
        if lead and (hi < 0 if lead > 0 else lo > 0):
            result["k_reversed"].append(k)
            result["first_k_reversed"] = result["first_k_reversed"] or k
        if sign and result["first_k_sign_flip"] is None and np.sign(m) == -sign:
            result["first_k_sign_flip"] = k
    return result


@pytest.mark.parametrize("seed", range(40))
def test_crossing_matches_a_scan_over_k(seed):
    rng = np.random.default_rng(seed)
    mean = np.cumsum(rng.normal(-0.02, 0.05, 16)) + rng.normal(0, 0.1)
    half = rng.uniform(0.01, 0.08, 16)
    difference = {"mean": mean.tolist(), "low": (mean - half).tolist(), "high": (mean + half).tolist()}
    assert crossing(difference) == _brute_crossing(mean, mean - half, mean + half)


def test_crossing_of_a_gap_that_closes_then_reverses():
    difference = {"mean": [0.3, 0.1, 0.0, -0.1, -0.2], "low": [0.2, 0.05, -0.05, -0.15, -0.3],
                  "high": [0.4, 0.15, 0.05, 0.02, -0.1]}
    assert crossing(difference) == {"lead_at_1": 1, "first_k_includes_zero": 3, "first_k_reversed": 5,
                                    "k_reversed": [5], "includes_zero_at_n": False, "first_k_sign_flip": 4}


def test_created_and_lost_count_problems_by_brute_force():
    rng = np.random.default_rng(0)
    after, before = rng.integers(0, 3, 50), rng.integers(0, 3, 50)
    result = created_and_lost(after, before)
    assert result["created"] == sum(1 for a, b in zip(after, before) if a > 0 and b == 0)
    assert result["lost"] == sum(1 for a, b in zip(after, before) if a == 0 and b > 0)
    assert sum(result.values()) == 50
    with pytest.raises(ValueError, match="same problems"):
        created_and_lost([1, 2], [1])


def test_large_k_results_pairs_the_models_on_the_same_resamples():
    scores = {"sft": {"n_samples": 4, "per_problem_correct": [0, 1, 4, 2, 0, 3]},
              "grpo": {"n_samples": 4, "per_problem_correct": [1, 4, 4, 0, 0, 4]}}
    result = large_k_results(scores, n_boot=300, seed=0)
    assert result["ks"] == [1, 2, 3, 4] and set(result["comparisons"]) == {"grpo_vs_sft"}
    comparison = result["comparisons"]["grpo_vs_sft"]
    assert (comparison["created"], comparison["lost"], comparison["both"], comparison["neither"]) == (1, 1, 3, 1)
    curves = result["curves"]
    assert comparison["difference"]["mean"] == pytest.approx(
        [a - b for a, b in zip(curves["grpo"]["mean"], curves["sft"]["mean"])])
    with pytest.raises(ValueError, match="resample them"):
        large_k_results({**scores, "base": {"n_samples": 8, "per_problem_correct": [0] * 6}})
