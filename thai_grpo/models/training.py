"""What every trainer shares: its arguments, its checkpoints, progress line and seeds. Checkpoints live outside
Snakemake's outputs (``results/checkpoints/<stage>``): an interrupted run keeps them and a rerun resumes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from thai_grpo.core.config import OURS

TRACKING_PROJECT = "thai-grpo"  # the project a tracker (training.report_to) files every run under

# Fields we always set ourselves, whatever TRL's defaults are in the installed release.
CPU_SAFE_DEFAULTS = {"report_to": "none", "activation_checkpointing": False, "logging_steps": 1,
                     "save_strategy": "steps", "save_total_limit": 2, "dataloader_num_workers": 0, "disable_tqdm": True}


def precision_flags(dtype: str = "auto") -> dict:
    """TRL's ``fp16``/``bf16`` from the frozen weights' dtype (``auto``: this machine's), and ``use_cpu`` on a CPU."""
    from thai_grpo.jobs.devices import current_capability
    from thai_grpo.models.loading import resolved_dtype_name

    name = resolved_dtype_name(dtype)
    flags = {"fp16": name == "float16", "bf16": name == "bfloat16"}
    return {"use_cpu": True, **flags} if current_capability() is None else flags


def trainer_args(user_args: dict, output_dir: str | Path, seed: int, dtype: str = "auto",
                 training: dict | None = None) -> dict:
    """Our defaults, the user's section (TRL names), ``precision_flags``, the tracker, paths and seed."""
    args = {**CPU_SAFE_DEFAULTS, **user_args, **precision_flags(dtype)}
    for ours in OURS:  # ours, not TRL's
        args.pop(ours, None)
    report_to = training["report_to"] if training else "none"  # no training section (SFT, the base): none
    if report_to != "none":
        args.update(report_to=report_to, run_name=Path(output_dir).name, project=TRACKING_PROJECT)
        if report_to == "tensorboard":  # transformers' TensorBoard callback reads its folder from the environment only
            os.environ["TENSORBOARD_LOGGING_DIR"] = str(tracking_dir(output_dir))
    return {**args, "output_dir": str(output_dir), "seed": seed, "data_seed": seed}


def tracking_dir(checkpoint_dir: str | Path) -> Path:
    """``results/tracking/<run>`` for ``results/checkpoints/<run>``: where a run's tracker writes."""
    checkpoint_dir = Path(checkpoint_dir)
    return checkpoint_dir.parent.parent / "tracking" / checkpoint_dir.name


def resume_point(checkpoint_dir: str | Path) -> str | None:
    """The newest complete ``checkpoint-N`` folder (said in the log), or None: one without a readable
    ``trainer_state.json`` (written last) was cut short by a kill."""
    def complete(path: Path) -> bool:
        try:
            state = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(state, dict) and "global_step" in state

    checkpoint_dir = Path(checkpoint_dir)
    found = [path for path in checkpoint_dir.glob("checkpoint-*") if path.name.split("-", 1)[1].isdigit()
             and complete(path)] if checkpoint_dir.is_dir() else []
    if not found:
        return None
    newest = max(found, key=lambda path: int(path.name.split("-", 1)[1]))
    print(f"resuming from {newest.name} in {checkpoint_dir}", flush=True)
    return str(newest)


def clear_checkpoints(checkpoint_dir: str | Path) -> None:
    """Checkpoints are only for resuming: they go once the stage's output is written."""
    shutil.rmtree(checkpoint_dir, ignore_errors=True)


def resume_in_order(trainer):
    """A GRPO-family ``trainer`` whose prompts come after a resume in the order of an uninterrupted run
    (``epoch_seeded``): TRL's ``RepeatSampler`` would replay epoch 0's order."""
    get_train_sampler = trainer._get_train_sampler
    trainer._get_train_sampler = lambda dataset=None: epoch_seeded(get_train_sampler(dataset))
    return trainer


def epoch_seeded(sampler):
    """TRL's ``RepeatSampler`` drawing epoch e (``set_epoch``) as the seed's (e+1)-th permutation; others unchanged."""
    import torch
    from trl.trainer.utils import RepeatSampler

    if type(sampler) is not RepeatSampler:
        return sampler

    class EpochRepeatSampler(RepeatSampler):
        epoch: int | None = None

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __iter__(self):
            if self.shuffle and self.seed is not None and self.epoch is not None:
                self.generator.manual_seed(self.seed)
                for _ in range(self.epoch):
                    torch.randperm(self.num_samples, generator=self.generator)
            return super().__iter__()

    return EpochRepeatSampler(data_source=sampler.data_source, mini_repeat_count=sampler.mini_repeat_count,
                              batch_size=sampler.batch_size, repeat_count=sampler.repeat_count,
                              shuffle=sampler.shuffle, seed=sampler.seed)


def progress_callback(label: str, every_seconds: float = 15.0):
    """A TrainerCallback printing ``label: step i/N (s/step, time left)`` at most every ``every_seconds``, and last."""
    import time

    from transformers import TrainerCallback

    from thai_grpo.core.io import progress

    class Progress(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.start, self.first_step, self.last = time.perf_counter(), state.global_step, 0.0

        def on_step_end(self, args, state, control, **kwargs):
            now, done, total = time.perf_counter(), state.global_step, state.max_steps
            if now - self.last < every_seconds and done < total:
                return
            self.last = now
            per_step = (now - self.start) / max(done - self.first_step, 1)
            progress(f"{label}: step {done}/{total} ({per_step:.2f} s/step, ~{per_step * (total - done) / 60:.1f} "
                     "min left)")

    return Progress()


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch. Not ``torch.use_deterministic_algorithms``: a CPU's kernels are deterministic for a
    fixed thread count, and it swaps in slow fallbacks; GPU runs are seeded but not bit-reproducible."""
    from transformers import set_seed

    set_seed(seed)
