"""Tests for thai_grpo.analyses.kl: k1/k3 estimators against the exact KL of two categoricals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from thai_grpo.analyses.kl import k1, k3, running_mean, sample_kl_estimates, true_kl

P = np.array([0.5, 0.3, 0.15, 0.05])
Q = np.array([0.25, 0.25, 0.25, 0.25])
Q_CLOSE = np.array([0.48, 0.31, 0.16, 0.05])


def test_formulas_on_scalars():
    logp, logq = np.log(0.5), np.log(0.25)
    assert k1(logp, logq) == pytest.approx(np.log(2))
    assert k3(logp, logq) == pytest.approx((0.5 - 1) - np.log(0.5))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(-50, 0), st.floats(-50, 0)), min_size=1, max_size=20))
def test_k3_is_nonnegative(pairs):
    logp, logq = np.array(pairs).T
    assert np.all(k3(logp, logq) >= 0.0)


def test_true_kl_matches_scipy():
    from scipy.stats import entropy

    assert true_kl(P, Q) == pytest.approx(entropy(P, Q))
    assert true_kl(P, P) == 0.0


def test_running_mean():
    assert running_mean(np.array([1.0, 3.0, 2.0, 6.0])).tolist() == [1.0, 2.0, 2.0, 3.0]


def test_estimators_converge_to_true_kl():
    estimates = sample_kl_estimates(P, Q, 200_000, np.random.default_rng(0))
    kl = estimates["true_kl"]
    assert kl == pytest.approx(true_kl(P, Q))
    assert estimates["k1"].mean() == pytest.approx(kl, rel=0.03)
    assert estimates["k3"].mean() == pytest.approx(kl, rel=0.03)
    assert running_mean(estimates["k3"])[-1] == pytest.approx(estimates["k3"].mean())
    assert np.all(estimates["k3"] >= 0.0)


def test_k1_goes_negative_and_k3_has_lower_variance_when_close():
    estimates = sample_kl_estimates(P, Q_CLOSE, 50_000, np.random.default_rng(1))
    assert np.any(estimates["k1"] < 0)
    assert estimates["k3"].var() < estimates["k1"].var() / 10


def completion_bootstrap_means(columns, lengths, n_boot=10_000, seed=0, batch=1000):
    """``cluster_bootstrap_means`` with every completion its own cluster."""
    from thai_grpo.analyses.kl import cluster_bootstrap_means

    return cluster_bootstrap_means(columns, lengths, list(range(len(lengths))), n_boot, seed, batch=batch)


def test_completion_bootstrap_resamples_whole_completions():
    rng = np.random.default_rng(0)
    lengths = [3, 1, 4, 2, 5]
    values = rng.normal(size=sum(lengths))
    result = completion_bootstrap_means({"v": values, "twice": 2 * values}, lengths, n_boot=300, seed=4, batch=70)
    pieces = np.split(values, np.cumsum(lengths)[:-1])
    draws = np.random.default_rng(4)
    brute = []
    for done in range(0, 300, 70):  # the same draws, one resample at a time: tokens of the chosen completions
        for rows in draws.integers(0, 5, size=(min(70, 300 - done), 5)):
            brute.append(np.concatenate([pieces[i] for i in rows]).mean())
    assert result["v"]["mean"] == pytest.approx(values.mean())
    assert [result["v"]["low"], result["v"]["high"]] == pytest.approx(np.quantile(brute, [0.025, 0.975]).tolist())
    assert result["v"]["se"] == pytest.approx(np.std(brute, ddof=1))
    assert result["twice"]["high"] == pytest.approx(2 * result["v"]["high"])  # one set of resamples for all columns
    with pytest.raises(ValueError, match="non-empty completions"):
        completion_bootstrap_means({"v": values}, [sum(lengths)])


def test_divergence_regimes_bin_by_exact_kl():
    from thai_grpo.analyses.kl import divergence_regimes

    kl_exact = np.array([1e-4, 5e-4, 0.05, 0.2, 0.3, 5.0])
    var_k1, var_k3 = np.array([1, 1, 4, 9, 9, 16.0]), np.array([0.25, 0.25, 1, 100, 100, 400.0])
    err1, err3 = np.array([1, -1, 2, 3, -3, 4.0]), np.array([0.5, 0.5, 1, 0, 0, 1.0])
    bins = divergence_regimes(kl_exact, var_k1, var_k3, err1, err3)
    assert [(b["low"], b["tokens"], b["winner"]) for b in bins] == [(0.0, 2, "k3"), (0.01, 1, "k3"), (0.1, 2, "k1"),
                                                                     (1.0, 1, "k1")]
    assert bins[2]["sd_k1"] == pytest.approx(3.0) and bins[2]["sd_k3"] == pytest.approx(10.0)
    assert bins[2]["rmse_k1"] == pytest.approx(3.0) and bins[0]["mean_kl"] == pytest.approx(3e-4)


def test_cluster_bootstrap_draws_equal_a_plain_loop_over_problems():
    """Each resample draws the problems with replacement (same rng as the loop) and pools the tokens of every
    completion of every drawn problem."""
    from thai_grpo.analyses.kl import cluster_bootstrap_draws

    lengths = [3, 1, 4, 2, 5, 2]
    problems = ["b", "a", "b", "c", "a", "c"]  # labels in any order: the clusters are sorted by label
    values = np.random.default_rng(0).normal(size=sum(lengths))
    draws = cluster_bootstrap_draws({"v": values}, lengths, problems, n_boot=50, seed=7, batch=50)["v"]
    pieces = np.split(values, np.cumsum(lengths)[:-1])
    labels = sorted(set(problems))
    rng = np.random.default_rng(7)
    loop = []
    for row in rng.integers(0, len(labels), size=(50, len(labels))):
        tokens = []
        for cluster in row:
            for completion, problem in enumerate(problems):
                if problem == labels[cluster]:
                    tokens.extend(pieces[completion])
        loop.append(sum(tokens) / len(tokens))
    assert draws == pytest.approx(loop)
    with pytest.raises(ValueError, match="one label per completion"):
        cluster_bootstrap_draws({"v": values}, lengths, problems[:-1])


def test_bootstrap_over_problems_is_wider_than_over_completions_when_kl_varies_by_problem():
    """32 problems x 8 completions whose KL level is the problem's: the completions of one problem are nearly
    copies, so resampling them as if independent understates the spread of the mean (about sqrt(8) here)."""
    from thai_grpo.analyses.kl import cluster_bootstrap_means

    rng = np.random.default_rng(1)
    problems = np.repeat(np.arange(32), 8)
    lengths = np.full(problems.size, 5)
    level = rng.gamma(2.0, 0.03, size=32)[problems]  # the problem's KL
    values = np.repeat(level, 5) + rng.normal(0, 0.002, size=lengths.sum())
    over_problems = cluster_bootstrap_means({"kl": values}, lengths, problems, n_boot=2000, seed=0)["kl"]
    over_completions = completion_bootstrap_means({"kl": values}, lengths, n_boot=2000, seed=0)["kl"]
    width = {name: r["high"] - r["low"] for name, r in (("problems", over_problems), ("completions", over_completions))}
    assert width["problems"] > 2 * width["completions"]
    assert over_problems["se"] / over_completions["se"] == pytest.approx(np.sqrt(8), rel=0.2)
