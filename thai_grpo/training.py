"""Shared plumbing of the three training stages (base pretraining, SFT, GRPO): datasets, checkpoints, logs.

Checkpoints live outside Snakemake's declared outputs (``results/checkpoints/<stage>``), so an interrupted
run keeps them: rerunning the rule resumes from the last one instead of starting over.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

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


def precision_flags() -> dict:
    """fp32 on CPU; fp16 mixed precision before Ampere (T4), bf16 from Ampere on (see models.choose_dtype)."""
    import torch

    from thai_grpo.models import device_dtype

    if not torch.cuda.is_available():
        return {"use_cpu": True, "bf16": False, "fp16": False}
    dtype = device_dtype()
    return {"bf16": dtype == "bfloat16", "fp16": dtype == "float16"}


def trainer_args(user_args: dict, output_dir: str | Path, seed: int) -> dict:
    """Our defaults, the machine's precision, then the user's section (TRL field names), then paths and seed."""
    args = {**CPU_SAFE_DEFAULTS, **precision_flags(), **user_args}
    args.pop("num_processes", None)  # ours: only for the batch-divisibility check (accelerate sets it)
    return {**args, "output_dir": str(output_dir), "seed": seed, "data_seed": seed}


def last_checkpoint(checkpoint_dir: str | Path) -> str | None:
    """The newest ``checkpoint-N`` folder to resume from, or None for a fresh start."""
    from transformers.trainer_utils import get_last_checkpoint

    checkpoint_dir = Path(checkpoint_dir)
    return get_last_checkpoint(str(checkpoint_dir)) if checkpoint_dir.is_dir() else None


def clear_checkpoints(checkpoint_dir: str | Path) -> None:
    """Checkpoints are only for resuming: once the stage's output is written they go."""
    shutil.rmtree(checkpoint_dir, ignore_errors=True)


def set_threads(threads: int | None) -> None:
    """Use the cores Snakemake gave the rule (``threads:``), no more: rules may run side by side."""
    import torch

    if threads:
        torch.set_num_threads(int(threads))
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))


def seed_everything(seed: int) -> None:
    from transformers import set_seed

    set_seed(seed, deterministic=False)
