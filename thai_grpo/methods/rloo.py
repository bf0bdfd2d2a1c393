"""RLOO (REINFORCE with a leave-one-out baseline, Ahmadian et al. 2024) with TRL's ``RLOOTrainer``, in GRPO's loop.
Advantage A_i = r_i - (sum_j r_j - r_i) / (G - 1), not divided by the group std; one clipped ratio per sequence, not
per token; no KL in the loss: beta x the sequence's summed k1 is subtracted from its reward.
"""

from __future__ import annotations

import numpy as np

from thai_grpo.core.config import inherited_args

KL_NOTE = "RLOO subtracts beta x the sequence's summed k1 = log(pi/pi_ref) from its reward"


def leave_one_out_advantages(rewards, group_size: int) -> np.ndarray:
    """A_i = r_i - (sum_{j in group} r_j - r_i) / (G - 1), flat, in the order of ``rewards`` (groups of G)."""
    groups = np.asarray(rewards, dtype=float).reshape(-1, group_size)
    if group_size < 2:
        raise ValueError(f"a leave-one-out baseline needs G >= 2, got {group_size}")
    baseline = (groups.sum(axis=1, keepdims=True) - groups) / (group_size - 1)
    return (groups - baseline).reshape(-1)


def rloo_args(grpo_args: dict, rloo_fields, overrides: dict | None = None) -> tuple[dict, list[str]]:
    """RLOOConfig's arguments from a merged ``grpo`` section, then the variant's ``rloo:`` overrides; also the GRPO-only
    fields dropped (sorted), so the run can say what it ignored."""
    kept, dropped = inherited_args(grpo_args, rloo_fields)
    return {**kept, **(overrides or {})}, dropped


def train(spec) -> dict:
    """Run RLOO from the SFT adapter with the ``grpo`` section's shared fields and the plan's ``rloo:`` overrides."""
    import dataclasses

    from trl import RLOOConfig, RLOOTrainer

    from thai_grpo.methods.grpo import train_with_rollouts

    args, dropped = rloo_args(spec.plan["grpo_args"], {f.name for f in dataclasses.fields(RLOOConfig)}, spec.plan["rloo"])
    print(f"RLOO: GRPO-only fields not used: {', '.join(dropped) or 'none'}", flush=True)
    result = train_with_rollouts(RLOOTrainer, RLOOConfig, args, spec, KL_NOTE, advantages=leave_one_out_advantages)
    return {"method": "rloo", **result, "dropped_grpo_fields": dropped}
