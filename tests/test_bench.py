"""The benchmark's bookkeeping: the GRPO step split."""

import pytest

from thai_grpo_tools.bench import PARTS, step_split


def test_step_split_skips_the_warm_up_and_shares_add_up_to_one():
    steps = [{**{p: 9.0 for p in PARTS}, "other": 9.0, "total": 63.0}]
    steps += [{**{p: float(i) for i, p in enumerate(PARTS, 1)}, "other": 0.5, "total": 21.5}] * 2
    split = step_split(steps)
    assert split["steps_timed"] == 2
    assert split["seconds"]["generation"] == 1.0 and split["seconds"]["total"] == 21.5
    assert sum(split["share"].values()) == pytest.approx(1.0)
