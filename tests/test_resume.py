"""The pieces of resuming a killed run: which checkpoint counts, half-written files, the per-epoch prompt order.
The run itself (GRPO killed with SIGKILL mid-training resumes from its last checkpoint and ends exactly where an
uninterrupted run ends) is tests/test_pipeline.py's, on a copy of the finished smoke run."""

from __future__ import annotations

import json

import pytest


def test_the_resume_point_skips_a_checkpoint_cut_short_by_a_kill(tmp_path):
    from thai_grpo.models.training import resume_point

    assert resume_point(tmp_path / "missing") is None
    for step, state in [(2, '{"global_step": 2}'), (10, '{"global_step": 10}'), (12, '{"global_st'), (14, None)]:
        (tmp_path / f"checkpoint-{step}").mkdir()
        if state is not None:
            (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(state)
    assert resume_point(tmp_path) == str(tmp_path / "checkpoint-10")  # not 9 < 10 by string order, not 12/14


def test_step_metrics_drop_a_last_line_cut_short(tmp_path):
    from thai_grpo.methods.recorder import read_step_metrics

    path = tmp_path / "step_metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"st')
    assert read_step_metrics(path) == [{"step": 1}, {"step": 2}]
    path.write_text('{"step": 1}\n{"st\n{"step": 3}\n')
    with pytest.raises(json.JSONDecodeError):
        read_step_metrics(path)


def test_prompt_order_of_an_epoch_does_not_depend_on_a_restart():
    """Epoch e of a sampler built fresh (as after a resume) is epoch e of one that ran from the start."""
    from trl.trainer.utils import RepeatSampler

    from thai_grpo.models.training import epoch_seeded

    options = dict(data_source=list(range(8)), mini_repeat_count=4, batch_size=2, seed=42)
    plain = RepeatSampler(**options)
    epochs = [list(plain) for _ in range(3)]
    assert epochs[0] != epochs[1]  # TRL reshuffles every epoch
    resumable = epoch_seeded(RepeatSampler(**options))
    for epoch in [2, 0, 1]:
        resumable.set_epoch(epoch)
        assert list(resumable) == epochs[epoch]
    assert list(epoch_seeded(RepeatSampler(**options))) == epochs[0]  # without set_epoch: TRL's behaviour
