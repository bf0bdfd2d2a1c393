"""The crossed random-effects analysis of a chains x problems matrix (thai_grpo_studies.crossed) against an explicit
ANOVA on design matrices, the exact moments of its quadratic forms, and simulated nulls in both variance regimes."""

import numpy as np
import pytest
from scipy import stats

from thai_grpo_studies.crossed import (crossed_components, crossed_mean_squares, crossed_t_test, crossed_t_tests,
                                          mean_variance, satterthwaite_df)


def projections(chains: int, problems: int) -> dict:
    """The ANOVA's projection matrices, built from explicit design matrices (C P x C P, row c * P + p)."""
    n = chains * problems
    one = np.ones((n, 1))
    rows = np.kron(np.eye(chains), np.ones((problems, 1)))  # chain indicators
    cols = np.kron(np.ones((chains, 1)), np.eye(problems))  # problem indicators

    def hat(x):
        return x @ np.linalg.pinv(x)

    grand, chain, problem = hat(one), hat(rows), hat(cols)
    return {"chain": chain - grand, "problem": problem - grand, "residual": np.eye(n) - chain - problem + grand}


def covariance(chains: int, problems: int, chain: float, problem: float, residual: float) -> np.ndarray:
    """Cov of vec(D) under the crossed model: chain (I_C x J_P) + problem (J_C x I_P) + residual I."""
    return (chain * np.kron(np.eye(chains), np.ones((problems, problems)))
            + problem * np.kron(np.ones((chains, chains)), np.eye(problems)) + residual * np.eye(chains * problems))


def test_mean_squares_equal_the_explicit_anova_on_design_matrices():
    rng = np.random.default_rng(0)
    d = rng.normal(size=(3, 5)) + rng.normal(size=(3, 1)) + rng.normal(size=(1, 5))
    ms = crossed_mean_squares(d)
    y = d.reshape(-1)
    for name, projection in projections(3, 5).items():
        df = round(np.trace(projection))
        assert df == ms["df"][name]
        assert ms[name] == pytest.approx(y @ projection @ y / df, rel=1e-12)


@pytest.mark.parametrize("components", [(0.5, 0.2, 1.0), (0.0, 2.0, 0.3), (3.0, 0.0, 0.1)])
def test_expected_mean_squares_and_the_variance_of_the_mean_are_exact(components):
    """E[y' A y] = tr(A Sigma): the mean squares' expectations, and the unbiased combination (no truncation in
    expectation) equals 1' Sigma 1 / (C P)^2, the exact variance of the grand mean (GLS-free brute force)."""
    chains, problems = 3, 4
    sigma = covariance(chains, problems, *components)
    expected = {name: np.trace(a @ sigma) / round(np.trace(a)) for name, a in projections(chains, problems).items()}
    chain, problem, residual = components
    assert expected["chain"] == pytest.approx(residual + problems * chain)
    assert expected["problem"] == pytest.approx(residual + chains * problem)
    assert expected["residual"] == pytest.approx(residual)
    exact = np.ones(chains * problems) @ sigma @ np.ones(chains * problems) / (chains * problems) ** 2
    assert (expected["chain"] + expected["problem"] - expected["residual"]) / (chains * problems) == pytest.approx(exact)


def test_satterthwaite_matches_the_exact_variance_of_the_combination():
    """nu = 2 E[V]^2 / Var(V) with Var(y' B y) = 2 tr((B Sigma)^2) computed on the design (Gaussian y): the formula on
    the expected mean squares gives the same number."""
    chains, problems, components = 3, 6, (0.4, 0.3, 0.5)
    sigma = covariance(chains, problems, *components)
    a = projections(chains, problems)
    dfs = {name: round(np.trace(m)) for name, m in a.items()}
    b = (a["chain"] / dfs["chain"] + a["problem"] / dfs["problem"] - a["residual"] / dfs["residual"])
    mean_v, var_v = np.trace(b @ sigma), 2 * np.trace(b @ sigma @ b @ sigma)
    squares = [np.trace(a[n] @ sigma) / dfs[n] for n in ("chain", "problem", "residual")]
    nu = satterthwaite_df([1, 1, -1], squares, [dfs[n] for n in ("chain", "problem", "residual")])
    assert nu == pytest.approx(2 * mean_v ** 2 / var_v, rel=1e-10)


def test_components_truncate_at_zero_and_the_variance_uses_what_is_kept():
    rng = np.random.default_rng(1)
    d = rng.normal(0, 1, size=(3, 50)) + rng.normal(0, 1.5, size=(1, 50))  # no chain effect: MS_chain ~ MS_residual
    ms = crossed_mean_squares(d)
    comps = crossed_components(ms)
    variance, df = mean_variance(ms)
    if ms["chain"] <= ms["residual"]:
        assert comps["chain"] == 0.0
        assert variance == pytest.approx(ms["problem"] / d.size) and df == pytest.approx(49)
    else:
        assert variance == pytest.approx((ms["chain"] + ms["problem"] - ms["residual"]) / d.size)
    assert comps["problem"] == pytest.approx((ms["problem"] - ms["residual"]) / 3)


def test_a_matrix_with_only_a_problem_term_gets_the_t_over_problems():
    """Chains identical: the test is the paired t over the problems' means (problems fixed, chains add nothing)."""
    rng = np.random.default_rng(2)
    problem = rng.normal(0.1, 0.3, size=40)
    d = np.tile(problem, (3, 1)) + rng.normal(0, 1e-6, size=(3, 40))
    test = crossed_t_test(d)
    assert test["p_value"] == pytest.approx(stats.ttest_1samp(d.mean(axis=0), 0).pvalue, rel=1e-3)
    assert test["df"] == pytest.approx(39, rel=1e-3)


def test_zero_variance_is_handled_by_the_mean_not_by_one_cell():
    assert crossed_t_test(np.zeros((3, 4)))["p_value"] == 1.0
    tiny = np.array([[1e-13, -1e-13], [0.0, 0.0], [0.0, 0.0]])
    assert crossed_t_test(tiny)["p_value"] == 1.0
    assert crossed_t_test(np.full((3, 4), 0.2))["p_value"] == 0.0


@pytest.mark.parametrize(("matrix", "message"), [
    (np.array([[0.1, np.nan], [0.2, 0.3]]), "1 missing cell"),
    (np.zeros((1, 5)), "at least 2 chains, got 1: list more in chains.seeds"),
    (np.zeros((3, 1)), "at least 2 held-out problems"),
    (np.zeros(4), "chains x problems matrix"),
])
def test_bad_matrices_are_refused_in_one_line(matrix, message):
    with pytest.raises(ValueError, match=message):
        crossed_t_test(matrix)


REGIMES = {"chain variance dominates": (0.045, 0.05, 0.15), "problem variance dominates": (0.005, 0.25, 0.15)}


@pytest.mark.parametrize("chains", [3, 6])
@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_false_positive_rate_is_near_five_percent_in_both_regimes(chains, regime):
    """4,000 simulated null matrices of chains x 200 problems (standard deviations of chain, problem and residual:
    REGIMES; chain SD 4.5 points as in the published chain study): the crossed t rejects 3-7% at 5%."""
    sd_chain, sd_problem, sd_residual = REGIMES[regime]
    rng = np.random.default_rng(100 + chains)
    sims, problems = 4000, 200
    d = (rng.normal(0, sd_chain, (sims, chains, 1)) + rng.normal(0, sd_problem, (sims, 1, problems))
         + rng.normal(0, sd_residual, (sims, chains, problems)))
    rate = float(np.mean(crossed_t_tests(d)["p_value"] < 0.05))
    assert 0.03 <= rate <= 0.07, rate


def test_the_t_over_chain_means_alone_over_rejects_when_problems_dominate():
    """The rule it replaces: Student's t over 3 chain means ignores the problems all chains share (same simulation)."""
    sd_chain, sd_problem, sd_residual = REGIMES["problem variance dominates"]
    rng = np.random.default_rng(7)
    d = (rng.normal(0, sd_chain, (2000, 3, 1)) + rng.normal(0, sd_problem, (2000, 1, 200))
         + rng.normal(0, sd_residual, (2000, 3, 200)))
    naive = stats.ttest_1samp(d.mean(axis=2), 0, axis=1).pvalue
    assert np.mean(naive < 0.05) > 0.1 > np.mean(crossed_t_tests(d)["p_value"] < 0.05)


def test_stacked_and_single_analyses_agree():
    rng = np.random.default_rng(3)
    stack = rng.normal(size=(4, 3, 10))
    many = crossed_t_tests(stack)
    for i, d in enumerate(stack):
        one = crossed_t_test(d)
        assert (one["p_value"], one["df"], one["se"]) == pytest.approx((many["p_value"][i], many["df"][i],
                                                                        many["se"][i]))
