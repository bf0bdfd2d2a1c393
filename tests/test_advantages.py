"""Group advantages (thai_grpo.methods.grpo, called with numpy arrays as the metrics and figures call it) against
the SPEC example and a brute-force statistics.stdev reference."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from thai_grpo.methods.recorder import frac_groups_nonzero_std
from thai_grpo.methods.grpo import group_advantages


def brute_force_advantages(rewards, group_size, scale_by_std=True, eps=1e-4):
    out = []
    for start in range(0, len(rewards), group_size):
        group = list(rewards[start : start + group_size])
        mean = statistics.fmean(group)
        scale = statistics.stdev(group) + eps if scale_by_std else 1.0
        out.extend((r - mean) / scale for r in group)
    return out


def test_spec_worked_example():
    rewards = [1.5, 0.3, 0.5, 1.5, 0.3, 0.0, 0.3, 0.5]
    expected = [1.56, -0.55, -0.20, 1.56, -0.55, -1.08, -0.55, -0.20]
    assert np.round(group_advantages(rewards, 8), 2).tolist() == expected


def test_all_equal_group_has_zero_advantage():
    assert group_advantages([0.3] * 4, 4).tolist() == [0.0] * 4
    assert group_advantages([1.5] * 4, 4, scale_by_std=False).tolist() == [0.0] * 4


def test_mixed_batch():
    rewards = [0.3, 0.3, 0.3, 0.3, 1.5, 0.0, 0.3, 1.3]
    assert frac_groups_nonzero_std(rewards, 4) == 0.5
    advantages = group_advantages(rewards, 4)
    assert advantages[:4].tolist() == [0.0] * 4
    assert advantages[4:].sum() == pytest.approx(0.0, abs=1e-12)


def test_dr_grpo_does_not_divide():
    rewards = [1.5, 0.0, 0.3, 0.2]
    mean = sum(rewards) / 4
    assert group_advantages(rewards, 4, scale_by_std=False) == pytest.approx([r - mean for r in rewards])


@settings(max_examples=100, deadline=None)
@given(
    st.integers(2, 8).flatmap(
        lambda g: st.tuples(
            st.just(g),
            st.lists(st.sampled_from([0.0, 0.2, 0.3, 0.5, 1.0, 1.2, 1.3, 1.5]), min_size=g, max_size=5 * g).map(
                lambda xs: xs[: len(xs) - len(xs) % g]
            ),
        )
    ),
    st.booleans(),
)
def test_matches_brute_force(group_and_rewards, scale_by_std):
    group_size, rewards = group_and_rewards
    expected = brute_force_advantages(rewards, group_size, scale_by_std)
    assert group_advantages(rewards, group_size, scale_by_std) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("rewards", "group_size"), [([1.0, 0.0, 1.0], 2), ([1.0, 0.0], 1), ([1.0], 0)])
def test_bad_shapes_raise(rewards, group_size):
    with pytest.raises(ValueError):
        group_advantages(rewards, group_size)
