"""The pooled many-to-one design of the seed and loss studies (thai_grpo_studies.many_to_one): Dunnett against
scipy.stats.dunnett, the block layout against an explicit least-squares ANOVA and the crossed analysis, TOST against
a brute-force search, and the block design's error rates in simulation."""

import numpy as np
import pytest
from scipy import stats

from thai_grpo_studies.crossed import crossed_t_test
from thai_grpo_studies.many_to_one import (contrast_variance, dunnett_critical, dunnett_p, interaction_mean_squares,
                                              many_to_one, many_to_one_correlation, tost)


def one_way(seed: int, sizes=(6, 6, 6, 6), shifts=(0.0, 0.4, 1.0, 1.6)):
    rng = np.random.default_rng(seed)
    control, *samples = [rng.normal(shift, 1.0, size) for shift, size in zip(shifts, sizes)]
    return control, samples


def one_way_t(control, samples):
    """Dunnett's t statistics and degrees of freedom of an unpaired one-way layout (pooled within-group variance)."""
    groups = [control, *samples]
    df = sum(g.size for g in groups) - len(groups)
    s2 = sum(((g - g.mean()) ** 2).sum() for g in groups) / df
    return [(x.mean() - control.mean()) / np.sqrt(s2 * (1 / x.size + 1 / control.size)) for x in samples], df, s2


def one_way_correlation(control, samples):
    n0, n = control.size, np.array([x.size for x in samples])
    rho = 1 / np.sqrt((n0 / n[:, None] + 1) * (n0 / n[None, :] + 1))
    np.fill_diagonal(rho, 1)
    return rho


@pytest.mark.parametrize("seed", [0, 1])
def test_dunnett_p_and_critical_value_match_scipy_in_the_unpaired_one_way_case(seed):
    control, samples = one_way(seed)
    reference = stats.dunnett(*samples, control=control, rng=np.random.default_rng(5))
    t, df, s2 = one_way_t(control, samples)
    assert t == pytest.approx(reference.statistic, rel=1e-10)
    ours = dunnett_p(t, df, many_to_one_correlation(3))
    assert ours == pytest.approx(reference.pvalue, abs=5e-4)
    allowance = dunnett_critical(df, many_to_one_correlation(3)) * np.sqrt(s2 * 2 / control.size)
    low = reference.confidence_interval().low
    means = np.array([x.mean() - control.mean() for x in samples])
    assert means - allowance == pytest.approx(low, abs=2e-3)


def test_dunnett_takes_any_correlation_unequal_sizes_included():
    control, samples = one_way(3, sizes=(8, 4, 6, 5))
    reference = stats.dunnett(*samples, control=control, rng=np.random.default_rng(2))
    t, df, _ = one_way_t(control, samples)
    assert dunnett_p(t, df, one_way_correlation(control, samples)) == pytest.approx(reference.pvalue, abs=5e-4)


def test_one_contrast_is_students_t():
    assert dunnett_p([2.0], 7.5, [[1.0]])[0] == pytest.approx(2 * stats.t.sf(2.0, 7.5))
    assert dunnett_critical(7.5, [[1.0]]) == pytest.approx(stats.t.ppf(0.975, 7.5))


def test_per_run_means_give_the_textbook_randomized_block_anova():
    """One value per run: the residual mean square of an explicit least-squares fit of method + seed effects."""
    rng = np.random.default_rng(4)
    methods, seeds = 4, 3
    y = rng.normal(size=(methods, seeds)) + rng.normal(size=(1, seeds))
    design = np.hstack([np.kron(np.eye(methods), np.ones((seeds, 1))), np.kron(np.ones((methods, 1)), np.eye(seeds))])
    fitted = design @ np.linalg.lstsq(design, y.reshape(-1), rcond=None)[0]
    df = (methods - 1) * (seeds - 1)
    ms_error = np.sum((y.reshape(-1) - fitted) ** 2) / df
    ms = interaction_mean_squares(y[:, :, None])
    assert ms["chain"] == pytest.approx(ms_error)
    assert contrast_variance(ms) == pytest.approx((2 * ms_error / seeds, df))


def test_two_methods_with_problems_are_the_crossed_analysis_of_their_differences():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 3, 30)) + rng.normal(size=(1, 3, 1)) + rng.normal(size=(1, 1, 30))
    pooled = many_to_one({"grpo": x[0], "rloo": x[1]}, "grpo")[0]
    crossed = crossed_t_test(x[1] - x[0])
    assert (pooled["se"], pooled["df"], pooled["p_value"]) == pytest.approx((crossed["se"], crossed["df"],
                                                                            crossed["p_value"]))


def test_a_seed_effect_shared_by_every_method_cancels():
    """The pairing by seed: a seed that lifts every method alike does not move any contrast or its variance."""
    rng = np.random.default_rng(6)
    x = {m: rng.normal(0.5, 0.1, size=(3, 40)) for m in ("grpo", "a", "b")}
    shifted = {m: v + np.array([[0.3], [-0.2], [0.1]]) for m, v in x.items()}
    for before, after in zip(many_to_one(x, "grpo"), many_to_one(shifted, "grpo")):
        assert (after["mean_diff"], after["se"], after["p_adjusted"]) == pytest.approx(
            (before["mean_diff"], before["se"], before["p_adjusted"]))


def brute_tost(estimate, se, df, margin):
    """The smallest alpha at which the 1 - 2 alpha interval estimate +- t_{1-alpha} se lies inside the margin."""
    grid = np.linspace(1e-5, 0.5, 50_000)
    inside = np.abs(estimate) + stats.t.ppf(1 - grid, df) * se < margin
    return grid[np.argmax(inside)] if inside.any() else 1.0


@pytest.mark.parametrize(("estimate", "se", "df"), [(0.01, 0.02, 10), (-0.03, 0.015, 40.5), (0.0, 0.01, 3),
                                                    (0.045, 0.02, 199)])
def test_tost_equals_the_interval_inclusion_rule(estimate, se, df):
    assert tost(estimate, se, df, margin=0.05) == pytest.approx(brute_tost(estimate, se, df, 0.05), abs=2e-5)


def test_tost_of_differences_that_do_not_vary_cannot_conclude():
    """Two identical runs: every paired difference 0, standard error 0, no t statistic; p is 1, never 0."""
    assert tost(0.0, 0.0, 199, margin=0.05) == 1.0
    assert tost(0.2, 0.0, 199, margin=0.05) == 1.0


def test_tost_refuses_a_margin_of_zero():
    with pytest.raises(ValueError, match="analysis.equivalence_margin"):
        tost(0.0, 0.01, 5, 0.0)


def test_the_block_design_keeps_its_error_rate_at_five_percent():
    """Many-to-one at 3 seeds, 4 methods, per-run means with a large seed block effect: each contrast's raw t
    rejects ~5% of true nulls, and Dunnett's familywise error over the 3 contrasts is ~5% (critical value computed
    once for the design's (M-1)(S-1) = 6 degrees of freedom)."""
    rng = np.random.default_rng(8)
    sims, methods, seeds = 4000, 4, 3
    y = rng.normal(0, 0.03, (sims, methods, seeds)) + rng.normal(0, 0.1, (sims, 1, seeds))
    interaction = y - y.mean(axis=2, keepdims=True) - y.mean(axis=1, keepdims=True) + y.mean(axis=(1, 2), keepdims=True)
    ms = np.sum(interaction ** 2, axis=(1, 2)) / 6
    t = (y[:, 1:].mean(axis=2) - y[:, :1].mean(axis=2)) / np.sqrt(2 * ms / seeds)[:, None]
    assert 0.03 <= np.mean(np.abs(t) > stats.t.ppf(0.975, 6)) <= 0.07
    critical = dunnett_critical(6, many_to_one_correlation(3))
    assert 0.03 <= np.mean(np.abs(t).max(axis=1) > critical) <= 0.07


@pytest.mark.parametrize(("matrices", "message"), [
    ({"a": np.zeros((3, 4))}, "needs the baseline 'grpo'"),
    ({"grpo": np.zeros((3, 4)), "a": np.zeros((2, 4))}, "a run at each seed"),
    ({"grpo": np.zeros((1, 4)), "a": np.zeros((1, 4))}, "at least 2 training seeds"),
])
def test_bad_layouts_are_refused_in_one_line(matrices, message):
    with pytest.raises(ValueError, match=message):
        many_to_one(matrices, "grpo")
