"""RLOO (REINFORCE with a leave-one-out baseline, Ahmadian et al. 2024) with TRL's ``RLOOTrainer``.

Same SFT adapter, same training problems, same code rewards and the same G completions per prompt as GRPO;
where it departs from GRPO (and from the textbook REINFORCE):
- Baseline: for completion i of a group, the mean reward of the other G - 1 completions,
  A_i = r_i - (sum_j r_j - r_i) / (G - 1) = G / (G - 1) * (r_i - mean). No division by the group std
  (``normalize_advantages: true`` in ``rloo:`` rescales over the whole batch instead).
- Loss: one log-probability ratio per sequence (not per token), clipped to [1 - epsilon, 1 + epsilon] as in
  PPO, averaged over sequences: a long completion does not weigh more than a short one.
- KL: not in the loss. ``beta`` times the sequence's summed k1 estimate log(pi_old / pi_ref) is subtracted
  from its reward before the baseline (the original RLOO paper's penalty; k1 can be negative per token).
- Reference: as GRPO's (``grpo.reference``: the base with the adapter disabled, or a frozen copy of the SFT
  adapter). No value network.
The per-step metrics come from the same group recorder as GRPO's (``thai_grpo.methods.grpo.train_with_rollouts``).
"""

from __future__ import annotations

import numpy as np

from thai_grpo.methods.settings import rloo_args

KL_NOTE = "RLOO subtracts beta x the sequence's summed k1 = log(pi/pi_ref) from its reward"


def leave_one_out_advantages(rewards, group_size: int) -> np.ndarray:
    """A_i = r_i - (sum_{j in group} r_j - r_i) / (G - 1), flat, in the order of ``rewards`` (groups of G)."""
    groups = np.asarray(rewards, dtype=float).reshape(-1, group_size)
    if group_size < 2:
        raise ValueError(f"a leave-one-out baseline needs G >= 2, got {group_size}")
    baseline = (groups.sum(axis=1, keepdims=True) - groups) / (group_size - 1)
    return (groups - baseline).reshape(-1)


def train(spec) -> dict:
    """Run RLOO from the SFT adapter with the GRPO section's shared settings (``spec``: ``thai_grpo.methods.RunSpec``,
    its plan's ``rloo:`` overrides on top); save the adapter; return steps."""
    import dataclasses

    from trl import RLOOConfig, RLOOTrainer

    from thai_grpo.methods.grpo import train_with_rollouts

    args, dropped = rloo_args(spec.plan["grpo_args"], {f.name for f in dataclasses.fields(RLOOConfig)}, spec.plan["rloo"])
    print(f"RLOO: GRPO-only fields not used: {', '.join(dropped) or 'none'}", flush=True)
    result = train_with_rollouts(RLOOTrainer, RLOOConfig, args, spec, KL_NOTE, advantages=leave_one_out_advantages)
    return {"method": "rloo", **result, "dropped_grpo_fields": dropped}
