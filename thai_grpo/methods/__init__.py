"""The trainers that turn the SFT adapter into a policy (``grpo``, ``rloo``, ``dpo``, ``ppo``) and what only they use.
A variant names its ``method``; ``train_variant`` runs its plan (``thai_grpo.workflow.variant_plan``) with it."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

# Each module is imported only when a run of its method trains, and has ``train(spec: RunSpec) -> dict``.
METHODS = {"grpo": "thai_grpo.methods.grpo", "rloo": "thai_grpo.methods.rloo", "dpo": "thai_grpo.methods.dpo",
           "ppo": "thai_grpo.methods.ppo"}


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One training run. ``plan``: ``thai_grpo.workflow.variant_plan``; ``training``: the config's ``training:``
    section; ``pairs``: DPO's preference pairs; ``reward_dir``: PPO's reward model (None when the verifier scores);
    ``rollouts``: where every rollout is written (None: not kept)."""
    run: str
    plan: dict
    base_dir: Path
    adapter_dir: Path
    train_rows: list
    system_prompt: str
    out_dir: Path
    checkpoint_dir: Path
    seed: int
    training: dict
    dtype: str = "auto"
    pairs: list | None = None
    reward_dir: Path | None = None
    rollouts: Path | None = None


def trainer_for(method: str):
    """The ``train(spec)`` function of ``method``'s module, imported now."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: use one of {', '.join(METHODS)}")
    return importlib.import_module(METHODS[method]).train


def train_variant(spec: RunSpec) -> dict:
    """Train one variant with its method's trainer; its record also names the plan's method, group and variant."""
    plan = spec.plan
    if plan["method"] == "dpo" and spec.pairs is None:
        raise ValueError(f"variant {plan['variant']!r} is DPO: it needs the preference pairs file")
    result = trainer_for(plan["method"])(spec)
    return {**result, "variant": plan["variant"], "method": plan["method"], "group": plan["group"]}
