"""What every trainer shares, whatever its method: its arguments, its checkpoints (one helper for every trainer, TRL's
and our own), progress line and seeds.

Checkpoints live outside Snakemake's declared outputs (``results/checkpoints/<stage>``), so an interrupted run keeps
them and rerunning the rule resumes from the last one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from thai_grpo.core.config import OURS

TRACKING_PROJECT = "thai-grpo"  # the project a tracker (training.report_to) files every run under
STATE_FILE = "state.pt"  # a checkpoint of a trainer of our own (PPO): trainable weights, optimizer, loss scale, step

# Fields we always set ourselves, whatever TRL's defaults are in the installed release.
CPU_SAFE_DEFAULTS = {
    "report_to": "none",
    "activation_checkpointing": False,
    "logging_steps": 1,
    "save_strategy": "steps",
    "save_total_limit": 2,
    "dataloader_num_workers": 0,
    "disable_tqdm": True,
}


def precision_flags(dtype: str = "auto") -> dict:
    """TRL's precision fields from the frozen weights' dtype (``auto`` resolved on this machine): ``fp16`` for
    float16, ``bf16`` for bfloat16, neither for float32; and ``use_cpu`` on a CPU."""
    from thai_grpo.jobs.devices import current_capability
    from thai_grpo.models.loading import resolved_dtype_name

    name = resolved_dtype_name(dtype)
    flags = {"fp16": name == "float16", "bf16": name == "bfloat16"}
    return {"use_cpu": True, **flags} if current_capability() is None else flags


def scale_float16_losses_on_cpu(trainer) -> None:
    """Give a CPU trainer with ``fp16=True`` float16 autocast and torch's loss scaler, as on a T4: accelerate silently
    runs neither on a CPU, so a float16 rehearsal would never scale a loss. Call before ``train()``; no-op elsewhere."""
    import torch

    accelerator = trainer.accelerator
    if trainer.args.fp16 and accelerator.device.type == "cpu" and accelerator.scaler is None:
        accelerator.native_amp = True
        accelerator.scaler = torch.amp.GradScaler("cpu")


def trainer_args(user_args: dict, output_dir: str | Path, seed: int, dtype: str = "auto",
                 training: dict | None = None) -> dict:
    """Our defaults, then the user's section (TRL field names), then ``precision_flags(dtype)``, the tracker of
    ``training.report_to``, paths and seed."""
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
    """Where a run's tracker writes: ``results/tracking/<run>`` for ``results/checkpoints/<run>``, kept after them."""
    checkpoint_dir = Path(checkpoint_dir)
    return checkpoint_dir.parent.parent / "tracking" / checkpoint_dir.name


def last_checkpoint(checkpoint_dir: str | Path) -> str | None:
    """The newest complete ``checkpoint-N`` folder to resume from, or None. The Trainer writes ``trainer_state.json``
    last and not atomically: a checkpoint without a readable one was cut short by a kill."""
    def complete(path: Path) -> bool:
        try:
            state = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(state, dict) and "global_step" in state

    checkpoint_dir = Path(checkpoint_dir)
    found = [path for path in checkpoint_dir.glob("checkpoint-*") if path.name.split("-", 1)[1].isdigit()
             and complete(path)] if checkpoint_dir.is_dir() else []
    return str(max(found, key=lambda path: int(path.name.split("-", 1)[1]))) if found else None


def resume_point(checkpoint_dir: str | Path) -> str | None:
    """``last_checkpoint``, said in the job's log when there is one: what every trainer resumes from."""
    resume_from = last_checkpoint(checkpoint_dir)
    if resume_from:
        print(f"resuming from {Path(resume_from).name} in {checkpoint_dir}", flush=True)
    return resume_from


def save_checkpoint(checkpoint_dir: str | Path, step: int, state: dict, keep: int = 2) -> None:
    """checkpoint-<step>/ for a trainer of our own: ``state`` (tensors, optimizer state, step) in ``STATE_FILE``, then
    ``trainer_state.json``, which marks it complete as the Trainer's does. Only the last ``keep`` are kept."""
    import torch

    from thai_grpo.core.io import atomic_directory, write_json

    checkpoint_dir = Path(checkpoint_dir)
    with atomic_directory(checkpoint_dir / f"checkpoint-{step}") as tmp:
        torch.save(state, tmp / STATE_FILE)
        write_json(tmp / "trainer_state.json", {"global_step": step})
    done = sorted((int(p.name.split("-")[1]), p) for p in checkpoint_dir.glob("checkpoint-*")
                  if p.name.split("-")[1].isdigit())
    for _, old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(path: str | Path, device) -> dict:
    """The ``state`` a ``save_checkpoint`` folder holds, its tensors on ``device``."""
    import torch

    return torch.load(Path(path) / STATE_FILE, weights_only=False, map_location=device)


def clear_checkpoints(checkpoint_dir: str | Path) -> None:
    """Checkpoints are only for resuming: once the stage's output is written they go."""
    shutil.rmtree(checkpoint_dir, ignore_errors=True)


def resume_in_order(trainer):
    """A GRPO-family ``trainer`` whose prompts come in the order of an uninterrupted run after a resume: TRL's
    ``RepeatSampler`` seeds its generator once and draws a new permutation each epoch, so a resumed run would replay
    epoch 0's order; here epoch e (from ``set_epoch``) gets the seed's (e+1)-th permutation (``epoch_seeded``)."""
    get_train_sampler = trainer._get_train_sampler
    trainer._get_train_sampler = lambda dataset=None: epoch_seeded(get_train_sampler(dataset))
    return trainer


def epoch_seeded(sampler):
    """TRL's ``RepeatSampler`` drawing epoch e's permutation as an uninterrupted run does (``resume_in_order``); any
    other sampler unchanged."""
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
    """A TrainerCallback printing ``label: step i/N (s/step, time left)`` at most every ``every_seconds``, and at the
    last step."""
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
    """Seed every generator (Python, NumPy, torch). Not ``torch.use_deterministic_algorithms``: on a CPU the kernels
    used are already deterministic for a fixed thread count, and it swaps in slow fallbacks. GPU runs are seeded but
    not bit-reproducible."""
    from transformers import set_seed

    set_seed(seed)
