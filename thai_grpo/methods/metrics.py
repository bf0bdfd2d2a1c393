"""Per-step training metrics computed from the groups themselves, beside what TRL logs. The key one is the share of
groups whose rewards differ: an all-equal group has zero advantage everywhere and teaches nothing.
"""

from __future__ import annotations

import numpy as np

from thai_grpo.core.rewards import CORRECT_REWARD, blank_think, has_think_block, hollow_think
from thai_grpo.methods.objective import group_reward_std

# TRL's log keys -> our names.
TRL_LOG_KEYS = {
    "kl": "kl",
    "completions/clipped_ratio": "clipped_ratio",
    "clip_ratio/region_mean": "clip_ratio",  # share of tokens whose ratio pi/pi_old was clipped (0 when on-policy)
    "frac_reward_zero_std": "frac_reward_zero_std_trl",
    "reward": "reward_mean_trl",
    "learning_rate": "learning_rate",
    "loss": "loss",
    "entropy": "entropy",
}


def frac_groups_nonzero_std(rewards, group_size: int, tol: float = 1e-8) -> float:
    """Fraction of groups with std_g > tol: the groups that carry a learning signal."""
    return float(np.mean(group_reward_std(rewards, group_size) > tol))


def total_rewards(rewards_by_name: dict[str, list[float]]) -> np.ndarray:
    """Each completion's summed reward (all reward weights are 1: the scale lives in the rewards)."""
    return np.sum([np.asarray(v, dtype=float) for v in rewards_by_name.values()], axis=0)


def empty_think(completion: str) -> bool:
    """True when the first ``<think>`` is closed at once (``<think></think>``): the lenient regex ``<think>.*?</think>``
    pays +0.3 for it, the strict ``<think>.+?</think>`` nothing. This is the chapter's reward hack."""
    return has_think_block(completion, lenient=True) and not has_think_block(completion)


def empty_think_share(completions: list[str]) -> float:
    """Share of completions whose think block is empty (``empty_think``); 0.0 for no completions."""
    return float(np.mean([empty_think(c) for c in completions])) if completions else 0.0


def blank_think_share(completions: list[str]) -> float:
    """Share of completions whose think block holds only whitespace or one character (``blank_think``); 0.0 for none."""
    return float(np.mean([blank_think(c) for c in completions])) if completions else 0.0


def hollow_think_paid_share(rewards_by_name: dict[str, list[float]], completions: list[str]) -> float:
    """Share of completions a format reward (any named ``format...``) paid for a think block with no reasoning in it
    (``hollow_think``): the format reward being hacked."""
    formats = [np.asarray(v, dtype=float) for name, v in rewards_by_name.items() if name.startswith("format")]
    if not completions or not formats:
        return 0.0
    paid = np.sum(formats, axis=0) > 0
    return float(np.mean([p and hollow_think(c) for p, c in zip(paid, completions)]))


def batch_metrics(rewards_by_name: dict[str, list[float]], completion_lengths: list[int], group_size: int,
                  completions: list[str] | None = None) -> dict:
    """Reward, per-function means, group spread, accuracy and length of one generation batch; given the texts, also the
    shares of empty and blank think blocks and of those a format reward paid."""
    totals = total_rewards(rewards_by_name)
    metrics = {
        "reward_mean": float(totals.mean()),
        "reward_std": float(totals.std(ddof=1)) if totals.size > 1 else 0.0,
        "rewards": {name: float(np.mean(values)) for name, values in rewards_by_name.items()},
        "frac_groups_nonzero_std": frac_groups_nonzero_std(totals, group_size),
        "completion_length_mean": float(np.mean(completion_lengths)),
        "generated_tokens": int(np.sum(completion_lengths)),
        "num_completions": int(totals.size),  # the shares' denominator: the detector's noise margins need it
    }
    if "correct" in rewards_by_name:
        metrics["accuracy"] = float(np.mean(np.asarray(rewards_by_name["correct"]) >= CORRECT_REWARD))
    if completions is not None:
        metrics["empty_think_share"] = empty_think_share(completions)
        metrics["blank_think_share"] = blank_think_share(completions)
        metrics["hollow_think_paid_share"] = hollow_think_paid_share(rewards_by_name, completions)
    return metrics


def with_trl_logs(metrics: dict, logs: dict) -> dict:
    """Add TRL's own numbers (KL, clipped ratio, its zero-std fraction for cross-checking)."""
    return {**metrics, **{ours: float(logs[theirs]) for theirs, ours in TRL_LOG_KEYS.items() if theirs in logs}}


def check_group_order(prompts: list, group_size: int) -> None:
    """TRL puts the G completions of one prompt next to each other; our group metrics rely on it."""
    for start in range(0, len(prompts), group_size):
        if any(p != prompts[start] for p in prompts[start:start + group_size]):
            raise RuntimeError(f"completions {start}..{start + group_size - 1} do not share one prompt: "
                               "group metrics assume TRL's consecutive-group order")
