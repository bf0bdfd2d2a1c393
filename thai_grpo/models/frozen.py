"""A frozen policy to score or sample with (evaluation's, PPO's references): folded into its base where the dtype
keeps a small update."""

from __future__ import annotations

from pathlib import Path

from thai_grpo.models.loading import MERGE_KEEPS_UPDATE, load_policy, resolved_dtype_name


def merge_keeps_update(dtype: str) -> bool:
    """Whether folding a small adapter update into base weights of ``dtype`` keeps it (``MERGE_KEEPS_UPDATE``)."""
    return resolved_dtype_name(dtype) in MERGE_KEEPS_UPDATE


def load_for_evaluation(base_path: str | Path, adapter_path: str | Path | None, dtype: str = "float32"):
    """The policy an evaluation scores, in eval mode: merged where ``dtype`` keeps a small update (float32)."""
    return load_policy(base_path, adapter_path, dtype=dtype, merged=merge_keeps_update(dtype)).eval()
