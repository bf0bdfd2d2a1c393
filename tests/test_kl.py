"""Tests for thai_grpo.kl: k1/k3 estimators against the exact KL of two categoricals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from thai_grpo.kl import k1, k3, running_mean, sample_kl_estimates, true_kl

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
