"""Methods: the trainers that turn the SFT adapter into a policy, and what only they use.

One module per method (``grpo``, ``rloo``, ``dpo``, ``ppo``) with what belongs to one of them beside it: PPO's
reward model (``reward_model``), DPO's preference pairs (``preferences``); what a config may say to each, checked before
any job (``settings``); and what the trainers share: the objective as the chapter writes it (``objective``: group
advantages, k3, the clipped surrogate), KL estimators (``kl``), per-step metrics (``metrics``), the step log and resume
(``step_log``), the update counts (``updates``) and the training-health checks (``health``). It may import ``models``,
``jobs``, ``data`` and ``core``, never ``evaluation`` or ``report``. This ``__init__`` is the dispatcher, as follows.

Which trainer a variant runs, and with which settings: GRPO, RLOO, DPO or PPO, all from the same SFT adapter.

A variant (``variants:`` in the config) is a named set of overrides on top of the ``grpo`` section and the
reward list. Its ``method`` picks the trainer (``grpo`` by default); ``rloo:`` and ``dpo:`` hold fields of
TRL's RLOOConfig / DPOConfig that have no GRPO counterpart; ``ppo:`` the fields of ``settings.PPOSettings`` (TRL 1.12
PPOConfig's names: our own trainer, since TRL 1.16 has none). Its ``group`` says where the report shows it:
``method`` = a row of the method comparison, ``ablation`` = a row of the comparison in the pitfalls report only,
``pitfall`` = the Pitfalls section (both built by ``snakemake pitfalls``), ``hacking`` = the reward-hacking
experiment (``snakemake hacking``), ``losses`` = the loss-family study (``snakemake losses``).
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

from thai_grpo.core.config import OURS, ConfigError, variant_settings

GROUPS = ("method", "ablation", "pitfall", "hacking", "losses")
# The registry: each method's module, imported only when a run of that method trains (a GRPO run imports no PPO,
# DPO or reward-model code). Every module has ``train(spec: RunSpec) -> dict``: the run's record for train.json.
METHODS = {"grpo": "thai_grpo.methods.grpo", "rloo": "thai_grpo.methods.rloo", "dpo": "thai_grpo.methods.dpo",
           "ppo": "thai_grpo.methods.ppo"}


def variant_plan(config: dict, variant: str) -> dict:
    """Everything the training rule needs for one variant, and nothing more (the rule's params: a knob reruns the
    variants that read it): method, group, the rewards, the method's own overrides and the part of the merged
    ``grpo`` section its trainer reads (``method_grpo_args``). Only this variant's entries: changing another
    variant's overrides leaves it (and so the rule's params) unchanged."""
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


# What PPO takes from a merged grpo section: it samples as GRPO does (temperature, completion budget, chat template)
# and its frozen reference is GRPO's KL reference (thai_grpo.methods.settings.ppo_settings).
PPO_FROM_GRPO = ("temperature", "max_completion_length", "reference", "chat_template_kwargs")


def method_grpo_args(method: str, grpo: dict) -> dict:
    """The part of a merged ``grpo`` section that ``method``'s trainer reads. GRPO: all of it. RLOO: all of it (its
    run records the GRPO-only fields it ignored). DPO: the DPOConfig fields ``dpo.dpo_args`` inherits (bookkeeping:
    logging, checkpoints, dropout; never beta, the loss or the schedule). PPO: ``PPO_FROM_GRPO``. The DPOConfig
    names come from the checked-in field list (``thai_grpo.core.trainer_fields``): no TRL import."""
    if method == "dpo":
        from thai_grpo.core.trainer_fields import fields_of
        from thai_grpo.methods.settings import NOT_INHERITED

        return {k: v for k, v in grpo.items() if k in fields_of("DPOConfig") and k not in NOT_INHERITED}
    if method == "ppo":
        return {k: grpo[k] for k in PPO_FROM_GRPO if k in grpo}
    return dict(grpo)


def method_kind(plan: dict) -> str:
    """The comparison row a variant fills: ``dr_grpo`` for GRPO with TRL's Dr.GRPO loss, else its method."""
    if plan["method"] == "grpo" and plan["grpo_args"].get("loss_type") == "dr_grpo":
        return "dr_grpo"
    return plan["method"]


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One training run, by name: what it trains from, on what, where it writes, in which precision.

    ``plan``: ``variant_plan`` (method, rewards, the method's trainer arguments); ``training``: the config's
    ``training:`` section (``max_lost_update_share``, ``report_to``); ``dtype``: ``base.dtype``; ``pairs``: DPO's
    preference pairs; ``reward_dir``: PPO's reward model (None when the verifier scores); ``rollouts``: the file every
    rollout of a GRPO, RLOO or PPO run is written to (None: not kept)."""
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
    """The ``train(spec)`` function of a method's module (``METHODS``), imported now."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: use one of {', '.join(METHODS)}")
    return importlib.import_module(METHODS[method]).train


def train_variant(spec: RunSpec) -> dict:
    """Train one variant from the SFT adapter with its method's trainer; the result records the plan's method, group
    and variant beside what the trainer returned."""
    plan = spec.plan
    if plan["method"] == "dpo" and spec.pairs is None:
        raise ValueError(f"variant {plan['variant']!r} is DPO: it needs the preference pairs file")
    result = trainer_for(plan["method"])(spec)
    return {**result, "variant": plan["variant"], "method": plan["method"], "group": plan["group"]}


def check_method_fields(config: dict) -> None:
    """Refuse a DPO max_length that leaves no room for a prompt, ``rloo:`` / ``dpo:`` fields TRL's RLOOConfig /
    DPOConfig do not have, ``ppo:`` fields ``PPOSettings`` does not have (each in one line naming the nearest valid
    name), and GRPO-only overrides in an RLOO or DPO variant (they would be silently ignored). TRL's names come from
    the checked-in list (``thai_grpo.core.trainer_fields``): it runs as Snakemake parses the workflow."""
    from thai_grpo.core.trainer_fields import fields_of, unknown_key
    from thai_grpo.methods.settings import PPO_FIELDS, check_max_length_in_config, ppo_settings

    check_max_length_in_config(config)
    classes = {"rloo": (fields_of("RLOOConfig"), "TRL's RLOOConfig"),
               "dpo": (fields_of("DPOConfig"), "TRL's DPOConfig"),
               "ppo": (frozenset(PPO_FIELDS), "thai_grpo.methods.settings.PPOSettings")}
    for name, overrides in config.get("variants", {}).items():
        method = overrides.get("method", "grpo")
        for section, (fields, owner) in classes.items():
            refusal = unknown_key(overrides.get(section, {}), fields, f"variants.{name}.{section}", owner)
            if refusal:
                raise ConfigError(refusal)
            if overrides.get(section) and method != section:
                raise ConfigError(f"variants.{name}.{section} is set but the variant's method is {method}: "
                                  f"add 'method: {section}' or remove the section")
        if method == "ppo":
            try:
                ppo_settings(variant_plan(config, name)["grpo_args"], overrides.get("ppo"))
            except ValueError as error:
                raise ConfigError(f"variants.{name}: {error}") from None
        if method == "rloo":
            grpo_only = sorted(set(overrides.get("grpo", {})) - fields_of("RLOOConfig") - set(OURS))
            if grpo_only:
                raise ConfigError(f"variants.{name}.grpo.{grpo_only[0]} has no RLOO counterpart (RLOOConfig has no "
                                  "such field) and would be ignored: remove it from this RLOO variant")
