"""Polish or create (thai_grpo.evaluation.narrowing): the gap the ceiling alone leaves, and a test of the excess
narrowing that keeps its error rate under that null."""

import numpy as np
import pytest

from thai_grpo.evaluation.narrowing import narrowing_test, null_gap
from thai_grpo.evaluation.passk import pass_at_k


def test_the_null_gap_is_the_uniform_improvements_expected_gap():
    """With population rates, the null's gap at k is exactly mean_j (1-q_j)^k - (1-q'_j)^k for q' = q + d (1 - q),
    and at k = 1 it is the pass@1 gap."""
    q = np.array([0.0, 0.1, 0.5, 0.9])
    delta = 0.3
    gap_1 = float(np.mean(delta * (1 - q)))
    expected = np.mean((1 - q) ** 4 - ((1 - delta) * (1 - q)) ** 4)
    assert null_gap(q, (1 - q) ** 4, gap_1, 4) == pytest.approx(expected)
    assert null_gap(q, 1 - q, gap_1, 1) == pytest.approx(gap_1)


def test_the_observed_gaps_are_the_unbiased_pass_at_k():
    weak, strong = [0, 2, 5, 8], [3, 4, 8, 8]
    result = narrowing_test(weak, strong, 8, 4, n_boot=200)
    assert result["gap_at_1"] == pytest.approx((3 + 2 + 3 + 0) / 32)
    assert result["gap_at_k"] == pytest.approx(np.mean([pass_at_k(8, s, 4) - pass_at_k(8, w, 4)
                                                        for w, s in zip(weak, strong)]))


def simulate(q_weak, q_strong, sims=400, n=8, k=4):
    verdicts = []
    for s in range(sims):
        rng = np.random.default_rng(1000 + s)
        verdicts.append(narrowing_test(rng.binomial(n, q_weak), rng.binomial(n, q_strong), n, k, n_boot=500,
                                       seed=s)["verdict"])
    return {v: verdicts.count(v) / sims for v in ("polish", "create", "not_resolved")}


def test_a_uniform_improvement_is_rarely_called_polish_or_create():
    """Under the null (the same share of failed tries fixed on every problem, some never solved) the test calls
    polish or create in about 5% of 400 simulated pairs, about half each way."""
    rng = np.random.default_rng(0)
    q = np.r_[np.zeros(40), rng.uniform(0.1, 0.9, 160)]
    rates = simulate(q, q + 0.3 * (1 - q))
    assert rates["polish"] <= 0.05 and rates["create"] <= 0.05 and rates["polish"] + rates["create"] <= 0.08


def test_gains_only_on_problems_already_reached_are_polish():
    rng = np.random.default_rng(1)
    q = np.r_[np.zeros(40), rng.uniform(0.1, 0.9, 160)]
    polished = np.where(q > 0, q + 0.5 * (1 - q), 0.0)
    assert simulate(q, polished, sims=40)["polish"] >= 0.9


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="same problems"):
        narrowing_test([1, 2], [1, 2, 3], 8, 4)
    with pytest.raises(ValueError, match="k in 2..n"):
        narrowing_test([1, 2], [1, 2], 8, 1)


def test_the_main_run_reads_the_narrowing_at_half_of_n_and_only_with_both_models():
    from thai_grpo.report.results import narrowing

    scores = {"sft": {"n_samples": 8, "per_problem_correct": [0, 1, 2, 5, 8, 0]},
              "grpo": {"n_samples": 8, "per_problem_correct": [0, 4, 6, 8, 8, 1]}}
    result = narrowing(scores, n_boot=200, seed=0)
    assert result["k"] == 4 and (result["weaker"], result["stronger"]) == ("sft", "grpo")
    assert narrowing({"sft": scores["sft"]}, 200, 0) is None
