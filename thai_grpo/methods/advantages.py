"""Group-relative advantages for GRPO.

Rewards arrive flat, ``len == B * G``, with consecutive blocks of ``G``
completions sampled for the same prompt (TRL's order). For group g with
rewards r_1..r_G, mean_g = (1/G) sum_i r_i and the sample standard deviation

    std_g = sqrt( sum_i (r_i - mean_g)^2 / (G - 1) )          (ddof = 1)

GRPO:     A_i = (r_i - mean_g) / (std_g + eps)
Dr.GRPO:  A_i =  r_i - mean_g                                 (scale_by_std=False)

A group whose rewards are all equal has A_i = 0 for every member: it carries
no learning signal.

These numpy functions feed the figures and the per-step health metrics; the
objective that trains, in torch, is ``thai_grpo.methods.objective``, whose
``group_advantages`` is this formula. tests/test_objective.py checks both
against the advantages TRL computes on a real batch of a run.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def _grouped(rewards: Sequence[float] | np.ndarray, group_size: int) -> np.ndarray:
    """Flat rewards -> array of shape (B, G); ValueError if G < 2 or len % G != 0."""
    values = np.asarray(rewards, dtype=float).reshape(-1)
    if group_size < 2:
        raise ValueError(f"group_size must be at least 2, got {group_size}")
    if values.size % group_size != 0:
        raise ValueError(f"{values.size} rewards do not split into groups of {group_size}")
    return values.reshape(-1, group_size)


def group_reward_std(rewards: Sequence[float] | np.ndarray, group_size: int) -> np.ndarray:
    """Per-group sample std (ddof=1): std_g = sqrt(sum_i (r_i - mean_g)^2 / (G - 1)); shape (B,)."""
    return _grouped(rewards, group_size).std(axis=1, ddof=1)


def group_advantages(
    rewards: Sequence[float] | np.ndarray,
    group_size: int,
    scale_by_std: bool = True,
    eps: float = 1e-4,
) -> np.ndarray:
    """Flat advantages, same order as rewards.

    A_i = (r_i - mean_g) / (std_g + eps) with the sample std (ddof=1);
    with scale_by_std=False (Dr.GRPO), A_i = r_i - mean_g.
    """
    groups = _grouped(rewards, group_size)
    centered = groups - groups.mean(axis=1, keepdims=True)
    if scale_by_std:
        centered = centered / (groups.std(axis=1, ddof=1, keepdims=True) + eps)
    return centered.reshape(-1)


def frac_groups_nonzero_std(
    rewards: Sequence[float] | np.ndarray, group_size: int, tol: float = 1e-8
) -> float:
    """Fraction of groups with std_g > tol, i.e. groups that carry a learning signal."""
    return float(np.mean(group_reward_std(rewards, group_size) > tol))
