"""The trainers that turn the SFT adapter into a policy (``grpo``, ``rloo``, ``dpo``, ``ppo``) and what only they use.

This ``__init__`` dispatches: a config variant (``variants:``) names its ``method`` (``grpo`` by default) and its
overrides on top of the ``grpo`` section; ``variant_plan`` picks what its trainer reads, ``train_variant`` runs it.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

from thai_grpo.core.config import ConfigError, variant_settings

# Each module is imported only when a run of its method trains, and has ``train(spec: RunSpec) -> dict``.
METHODS = {"grpo": "thai_grpo.methods.grpo", "rloo": "thai_grpo.methods.rloo", "dpo": "thai_grpo.methods.dpo",
           "ppo": "thai_grpo.methods.ppo"}


def variant_plan(config: dict, variant: str) -> dict:
    """What the training rule needs for one variant and nothing more (the rule's params, so a knob reruns only the
    variants that read it): method, group, rewards, the method's own overrides and ``method_grpo_args``."""
    settings = variant_settings(config, variant)
    overrides = config["variants"][variant]
    method = overrides["method"]
    if method not in METHODS:
        raise ConfigError(f"variants.{variant}.method={method!r}: use one of {', '.join(METHODS)}")
    return {"variant": variant, "method": method, "group": overrides["group"],
            "grpo_args": method_grpo_args(method, settings["grpo"]),
            "rewards": [] if method == "dpo" else settings["rewards"],  # DPO's pairs are ranked by correctness alone
            "rloo": dict(overrides.get("rloo", {})), "dpo": dict(overrides.get("dpo", {})),
            "ppo": dict(overrides.get("ppo", {}))}


# What PPO takes from a merged grpo section: it samples as GRPO does, and its frozen reference is GRPO's KL reference.
PPO_FROM_GRPO = ("temperature", "max_completion_length", "reference", "chat_template_kwargs")


def method_grpo_args(method: str, grpo: dict) -> dict:
    """The part of a merged ``grpo`` section that ``method``'s trainer reads: all of it for GRPO and RLOO, the inherited
    bookkeeping fields for DPO (never beta, the loss or the schedule), ``PPO_FROM_GRPO`` for PPO. Imports no TRL."""
    if method == "dpo":
        from thai_grpo.core.trainer_fields import fields_of
        from thai_grpo.methods.settings import NOT_INHERITED

        return {k: v for k, v in grpo.items() if k in fields_of("DPOConfig") and k not in NOT_INHERITED}
    if method == "ppo":
        return {k: grpo[k] for k in PPO_FROM_GRPO if k in grpo}
    return dict(grpo)


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One training run. ``plan``: ``variant_plan``; ``training``: the config's ``training:`` section; ``pairs``: DPO's
    preference pairs; ``reward_dir``: PPO's reward model (None when the verifier scores); ``rollouts``: where every
    rollout is written (None: not kept)."""
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
