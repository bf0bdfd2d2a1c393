"""A GRPO run killed with SIGKILL mid-training resumes from its last checkpoint when rerun, and ends exactly
where an uninterrupted run ends (config/smoke.yaml, GRPO stretched to 12 steps with a checkpoint every 2).
The fast tests below pin the pieces: which checkpoint counts, half-written files, the per-epoch prompt order."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from workflow import OFFLINE_ENV, copy_workflow
from workflow import run_snakemake as snakemake

SNAKEMAKE = [sys.executable, "-m", "snakemake", "--cores", "1"]
ENV = {**os.environ, **OFFLINE_ENV}

MAX_STEPS = 12
CONFIG = ["--configfile", "config/smoke.yaml", "--config", f'grpo={{"max_steps":{MAX_STEPS},"save_steps":2}}']
TARGET = "results/runs/grpo/train.json"
ADAPTER = "results/runs/grpo/adapter"
CHECKPOINTS = "results/checkpoints/grpo-grpo"
LOG = "results/logs/train-grpo.log"
# smoke: 8 GRPO prompts, 2 per step -> 4 steps per epoch. Killing after checkpoint-4 makes the rerun resume in
# a later epoch than the first, where the prompt order must still match the uninterrupted run's.
KILL_AFTER_CHECKPOINT = 4


def complete_checkpoints(folder: Path) -> list[int]:
    """Steps of the checkpoints the Trainer finished writing (trainer_state.json is its last file)."""
    return sorted(int(path.name.split("-")[1]) for path in folder.glob("checkpoint-*")
                  if (path / "trainer_state.json").is_file())


def start_and_kill(workdir: Path, output: Path) -> None:
    """Start the GRPO job in its own process group; SIGKILL the whole group once a checkpoint is written."""
    checkpoints = workdir / CHECKPOINTS
    with open(output, "w") as handle:
        process = subprocess.Popen([*SNAKEMAKE, TARGET, *CONFIG], cwd=workdir, env=ENV, stdout=handle,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not any(step >= KILL_AFTER_CHECKPOINT for step in complete_checkpoints(checkpoints)):
            assert process.poll() is None, f"GRPO ended before it could be killed:\n{output.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "no checkpoint within 300 s"
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # Snakemake and the training script it started
        process.wait()
    assert process.returncode == -signal.SIGKILL, output.read_text()[-3000:]


def adapter_tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return {name: tensor for path in sorted(folder.glob("*.safetensors")) for name, tensor in load_file(path).items()}


def test_last_checkpoint_skips_one_cut_short_by_a_kill(tmp_path):
    from thai_grpo.models.training import last_checkpoint

    assert last_checkpoint(tmp_path / "missing") is None
    for step, state in [(2, '{"global_step": 2}'), (10, '{"global_step": 10}'), (12, '{"global_st'), (14, None)]:
        (tmp_path / f"checkpoint-{step}").mkdir()
        if state is not None:
            (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(state)
    assert last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")  # not 9 < 10 by string order, not 12/14


def test_step_metrics_drop_a_last_line_cut_short(tmp_path):
    from thai_grpo.methods.grpo import read_step_metrics

    path = tmp_path / "step_metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"st')
    assert read_step_metrics(path) == [{"step": 1}, {"step": 2}]
    path.write_text('{"step": 1}\n{"st\n{"step": 3}\n')
    with pytest.raises(json.JSONDecodeError):
        read_step_metrics(path)


def test_prompt_order_of_an_epoch_does_not_depend_on_a_restart():
    """Epoch e of a sampler built fresh (as after a resume) is epoch e of one that ran from the start."""
    from trl.trainer.utils import RepeatSampler

    from thai_grpo.methods.grpo import epoch_seeded

    options = dict(data_source=list(range(8)), mini_repeat_count=4, batch_size=2, seed=42)
    plain = RepeatSampler(**options)
    epochs = [list(plain) for _ in range(3)]
    assert epochs[0] != epochs[1]  # TRL reshuffles every epoch
    resumable = epoch_seeded(RepeatSampler(**options))
    for epoch in [2, 0, 1]:
        resumable.set_epoch(epoch)
        assert list(resumable) == epochs[epoch]
    assert list(epoch_seeded(RepeatSampler(**options))) == epochs[0]  # without set_epoch: TRL's behaviour


@pytest.mark.slow
def test_killed_grpo_resumes_from_last_checkpoint(tmp_path):
    workdir = copy_workflow(tmp_path / "workflow")
    upstream = snakemake(workdir, "results/model/sft_adapter", *CONFIG)
    assert upstream.returncode == 0, upstream.stderr[-4000:]

    start_and_kill(workdir, tmp_path / "killed.txt")
    assert not (workdir / ADAPTER).exists() and not (workdir / TARGET).exists()
    assert complete_checkpoints(workdir / CHECKPOINTS), "the checkpoints did not survive the kill"
    first_run = [json.loads(line) for line in (workdir / CHECKPOINTS / "step_metrics.jsonl").read_text().splitlines()]

    rerun = snakemake(workdir, TARGET, *CONFIG)
    if rerun.returncode != 0 and "--unlock" in rerun.stdout + rerun.stderr:
        # A SIGKILLed Snakemake leaves its directory lock behind and says to run --unlock once: do as it says.
        unlock = snakemake(workdir, TARGET, *CONFIG, "--unlock")
        assert unlock.returncode == 0, unlock.stderr[-3000:]
        rerun = snakemake(workdir, TARGET, *CONFIG)
    assert rerun.returncode == 0, rerun.stderr[-4000:]

    log = (workdir / LOG).read_text()
    resumed = re.search(r"resuming from checkpoint-(\d+)", log)
    assert resumed, log[-3000:]
    step = int(resumed.group(1))
    assert step >= KILL_AFTER_CHECKPOINT
    trained_now = [line for line in log.splitlines() if line.startswith("{'loss'")]
    assert len(trained_now) == MAX_STEPS - step, "the rerun trained steps the checkpoint already had"

    result = json.loads((workdir / TARGET).read_text())
    assert [s["step"] for s in result["steps"]] == list(range(1, MAX_STEPS + 1))
    assert result["steps"][:step] == [s for s in first_run if s["step"] <= step]  # kept from the killed run
    assert (workdir / ADAPTER / "adapter_config.json").is_file()
    assert not (workdir / CHECKPOINTS).exists(), "checkpoints are removed once the stage succeeds"

    # The same job uninterrupted: every step's numbers, the example groups and the adapter are identical.
    resumed_adapter = adapter_tensors(workdir / ADAPTER)
    fresh = snakemake(workdir, TARGET, "--forcerun", "train", *CONFIG)
    assert fresh.returncode == 0, fresh.stderr[-4000:]
    assert "resuming from" not in (workdir / LOG).read_text()
    uninterrupted = json.loads((workdir / TARGET).read_text())
    assert result["steps"] == uninterrupted["steps"]
    assert result["example_groups"] == uninterrupted["example_groups"]
    fresh_adapter = adapter_tensors(workdir / ADAPTER)
    assert resumed_adapter.keys() == fresh_adapter.keys()
    assert all((resumed_adapter[name] == fresh_adapter[name]).all() for name in fresh_adapter)
