"""Tests for thai_grpo.evaluation.intervals: Wilson against the textbook formula, bootstrap behaviour."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from thai_grpo.evaluation.intervals import (bootstrap_interval, bootstrap_p, estimate_with_interval,
                                            paired_bootstrap_test, pass_at_k_with_interval, wilson_interval,
                                            wilson_interval_fractional)
from thai_grpo.evaluation.passk import mean_pass_at_k


def textbook_wilson(s: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson (1927): (p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    z = norm.ppf(1 - (1 - confidence) / 2)
    p = s / n
    center = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (center - spread) / (1 + z * z / n), (center + spread) / (1 + z * z / n)


def test_known_values():
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(10, 10)[1] == 1.0


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
@pytest.mark.parametrize(("s", "n"), [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (7, 50), (412, 1319)])
def test_wilson_matches_textbook_and_fractional(s, n, confidence):
    expected = textbook_wilson(s, n, confidence)
    assert wilson_interval(s, n, confidence) == pytest.approx(expected, abs=1e-12)
    assert wilson_interval_fractional(s, n, confidence) == pytest.approx(wilson_interval(s, n, confidence), abs=1e-12)


def test_fractional_wilson_between_integer_neighbours():
    low, high = wilson_interval_fractional(3.5, 10)
    assert (low, high) == pytest.approx(textbook_wilson(3.5, 10))
    assert wilson_interval(3, 10)[0] < low < wilson_interval(4, 10)[0]


def test_zero_trials_raise():
    with pytest.raises(ValueError, match="at least one trial"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError):
        wilson_interval_fractional(0.0, 0)


def test_estimate_with_interval():
    result = estimate_with_interval(5, 10)
    assert result["estimate"] == 0.5
    assert (result["wilson_low"], result["wilson_high"]) == wilson_interval(5, 10)


def test_pass_at_k_with_interval_trials():
    counts, n = [0, 3, 8, 8, 5], 8
    at1 = pass_at_k_with_interval(counts, n, 1)
    assert at1["trials"] == 40
    assert at1["estimate"] == pytest.approx(24 / 40)
    assert (at1["wilson_low"], at1["wilson_high"]) == pytest.approx(wilson_interval(24, 40), abs=1e-12)
    at4 = pass_at_k_with_interval(counts, n, 4)
    assert at4["trials"] == 5
    assert at4["estimate"] == pytest.approx(mean_pass_at_k(counts, n, 4))
    assert (at4["wilson_low"], at4["wilson_high"]) == pytest.approx(textbook_wilson(at4["estimate"] * 5, 5))
    assert at4["wilson_high"] - at4["wilson_low"] > at1["wilson_high"] - at1["wilson_low"]


def test_bootstrap_interval_is_deterministic_and_contains_mean():
    values = np.random.default_rng(3).binomial(1, 0.4, size=300).astype(float)
    first = bootstrap_interval(values, n_boot=2000, seed=7)
    assert first == bootstrap_interval(values, n_boot=2000, seed=7)
    assert first != bootstrap_interval(values, n_boot=2000, seed=8)
    assert first[0] < values.mean() < first[1]
    half_width = 1.96 * values.std(ddof=1) / math.sqrt(values.size)
    assert first[1] - first[0] == pytest.approx(2 * half_width, rel=0.15)


def test_paired_test_detects_a_real_difference():
    rng = np.random.default_rng(0)
    difficulty = rng.uniform(0.1, 0.9, size=200)
    a = np.clip(difficulty + 0.15 + rng.normal(0, 0.05, 200), 0, 1)
    b = np.clip(difficulty + rng.normal(0, 0.05, 200), 0, 1)
    result = paired_bootstrap_test(a, b, n_boot=2000)
    assert result["mean_diff"] == pytest.approx(float(np.mean(a - b)))
    assert 0 < result["ci_low"] < result["mean_diff"] < result["ci_high"]
    assert result["p_value"] < 0.01
    assert result == paired_bootstrap_test(a, b, n_boot=2000)


def test_paired_test_on_same_distribution_noise():
    rng = np.random.default_rng(1)
    difficulty = rng.uniform(0.1, 0.9, size=200)
    a = rng.binomial(8, difficulty) / 8
    b = rng.binomial(8, difficulty) / 8
    result = paired_bootstrap_test(a, b, n_boot=2000)
    assert result["p_value"] > 0.05
    assert result["ci_low"] < 0 < result["ci_high"]
    assert paired_bootstrap_test(a, a, n_boot=500)["p_value"] == 1.0


def test_a_bootstrap_p_is_never_0_and_says_when_it_is_at_its_floor():
    """Every resample far from the null: p = (1 + 0) / (B + 1), flagged as a bound; otherwise counted in."""
    a, b = np.full(50, 0.9), np.r_[np.full(25, 0.1), np.full(25, 0.2)]
    far = paired_bootstrap_test(a, b, n_boot=999)
    assert far["p_value"] == pytest.approx(1 / 1000) and far["p_at_floor"] and far["n_resamples"] == 999
    draws = np.array([0.0, 0.5, 1.0, 2.0])
    assert bootstrap_p(draws, 1.0) == {"p_value": (1 + 2) / 5, "p_at_floor": False, "n_resamples": 4}
    assert bootstrap_p(draws, 0.0)["p_value"] == 1.0


def test_paired_test_needs_same_problems():
    with pytest.raises(ValueError):
        paired_bootstrap_test([1.0, 0.0], [1.0, 0.0, 1.0])


def test_holm_matches_its_definition_by_brute_force():
    from itertools import permutations

    from thai_grpo.evaluation.scoring import holm_adjust

    rng = np.random.default_rng(0)
    for _ in range(50):
        p = list(rng.uniform(0, 0.2, size=rng.integers(1, 6)))
        m = len(p)
        order = sorted(range(m), key=lambda i: p[i])
        expected = [0.0] * m
        for rank, index in enumerate(order):  # adjusted p_(i) = max over j <= i of min(1, (m - j) p_(j)), 0-based
            expected[index] = max(min(1.0, (m - j) * p[order[j]]) for j in range(rank + 1))
        assert holm_adjust(p) == pytest.approx(expected)
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert list(permutations([1])) and holm_adjust([]) == []


def _scores(correct, greedy, n=4):
    return {"per_problem_correct": correct, "n_samples": n, "per_problem_greedy": greedy}


def test_pairwise_tests_cover_every_pair_and_both_metrics_with_resamples_recorded():
    from thai_grpo.evaluation.scoring import pairwise_tests

    scores = {"sft": _scores([0, 1, 2, 0, 1, 0], [0, 1, 1, 0, 0, 0]),
              "grpo": _scores([4, 4, 4, 4, 4, 4], [1, 1, 1, 1, 1, 1]),
              "dr_grpo": _scores([4, 4, 4, 4, 4, 3], [1, 1, 1, 1, 1, 1])}
    tests = pairwise_tests(scores, ["sft", "grpo", "dr_grpo"], n_boot=500, seed=0)
    assert [(t["a"], t["b"], t["metric"]) for t in tests] == [
        ("grpo", "sft", "pass@1"), ("dr_grpo", "sft", "pass@1"), ("dr_grpo", "grpo", "pass@1"),
        ("grpo", "sft", "greedy"), ("dr_grpo", "sft", "greedy"), ("dr_grpo", "grpo", "greedy")]
    by = {(t["a"], t["b"], t["metric"]): t for t in tests}
    assert by[("grpo", "sft", "pass@1")]["mean_diff"] == pytest.approx(np.mean([4, 3, 2, 4, 3, 4]) / 4)
    primary = by[("grpo", "sft", "pass@1")]
    assert primary["family"] == "primary" and primary["verdict"] == "higher" and primary["p_holm"] == primary["p_value"]
    assert by[("dr_grpo", "grpo", "pass@1")]["family"] == "methods"
    assert by[("dr_grpo", "grpo", "pass@1")]["verdict"] in ("not_resolved", "equivalent", "not_tested")
    assert by[("dr_grpo", "grpo", "greedy")]["mean_diff"] == 0 and by[("dr_grpo", "grpo", "greedy")]["family"] == \
        "secondary"
    for t in tests:
        assert t["n_resamples"] == 500 and t["p_holm"] >= t["p_value"] > 0 and 0 <= t["tost_p"] <= 1
