"""What every trainer shares, whatever its method: its arguments, checkpoints, progress line and seeds.

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
    checkpoint_dir = Path(checkpoint_dir)
    if not checkpoint_dir.is_dir():
        return None
    complete = [path for path in checkpoint_dir.glob("checkpoint-*")
                if path.name.split("-", 1)[1].isdigit() and _complete_checkpoint(path)]
    return str(max(complete, key=lambda path: int(path.name.split("-", 1)[1]))) if complete else None


def _complete_checkpoint(path: Path) -> bool:
    try:
        state = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(state, dict) and "global_step" in state


def clear_checkpoints(checkpoint_dir: str | Path) -> None:
    """Checkpoints are only for resuming: once the stage's output is written they go."""
    shutil.rmtree(checkpoint_dir, ignore_errors=True)


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
