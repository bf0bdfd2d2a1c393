"""The power of the crossed test (thai_grpo_studies.power) against simulation, and the chain counts it gives."""

import numpy as np
import pytest

from thai_grpo_studies.crossed import crossed_t_tests
from thai_grpo_studies.power import components_from_summary, crossed_power, expected_variance, units_needed


@pytest.mark.parametrize(("components", "chains", "effect"), [
    ({"chain": 0.002, "problem": 0.05, "residual": 0.02}, 4, 0.08),   # chain variance dominates
    ({"chain": 0.0001, "problem": 0.06, "residual": 0.02}, 3, 0.04),  # problem variance dominates
])
def test_power_matches_the_rejection_rate_of_simulated_studies(components, chains, effect):
    rng = np.random.default_rng(11)
    sims, problems = 3000, 200
    d = (effect + rng.normal(0, np.sqrt(components["chain"]), (sims, chains, 1))
         + rng.normal(0, np.sqrt(components["problem"]), (sims, 1, problems))
         + rng.normal(0, np.sqrt(components["residual"]), (sims, chains, problems)))
    simulated = float(np.mean(crossed_t_tests(d)["p_value"] < 0.05))
    assert crossed_power(components, chains, problems, effect) == pytest.approx(simulated, abs=0.05)


def test_more_chains_only_shrink_the_chain_term():
    components = {"chain": 0.002, "problem": 0.06, "residual": 0.01}
    variances = [expected_variance(components, c, 200)[0] for c in (2, 5, 50, 5000)]
    assert variances == sorted(variances, reverse=True) and variances[-1] > 0.06 / 200
    needed = units_needed(components, 200, 0.10)
    assert crossed_power(components, needed, 200, 0.10) >= 0.8 > crossed_power(components, needed - 1, 200, 0.10)
    assert units_needed(components, 200, 0.02) is None  # the problem term alone is too large: more problems


def test_published_numbers_give_conservative_components():
    components = components_from_summary([0.1925, 0.2387, 0.2825], problem_se=0.0184, problems=200)
    assert components["chain"] == pytest.approx(np.var([0.1925, 0.2387, 0.2825], ddof=1))
    assert components["problem"] == pytest.approx(200 * 0.0184 ** 2) and components["residual"] == 0.0
    with pytest.raises(ValueError, match="at least 2 chains"):
        components_from_summary([0.2], 0.01, 200)
