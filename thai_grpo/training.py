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
    "bf16": False,
    "fp16": False,
    "activation_checkpointing": False,
    "logging_steps": 1,
    "save_strategy": "steps",
    "save_total_limit": 2,
    "dataloader_num_workers": 0,
    "disable_tqdm": True,
}


def trainer_args(user_args: dict, output_dir: str | Path, seed: int) -> dict:
    """Our CPU-safe defaults, then the user's config section (TRL field names), then paths and seed."""
    import torch

    args = {**CPU_SAFE_DEFAULTS, **user_args, "output_dir": str(output_dir), "seed": seed, "data_seed": seed}
    if not torch.cuda.is_available():
        args.update(use_cpu=True, bf16=False, fp16=False)
    return args


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
