"""What each stage's trainer is given by a config, as the training code builds it: the values the chapter's contract
(``thai_grpo.core.chapter``) is checked against.

``stage_arguments`` builds, for one stage, the TRL config object (``GRPOConfig``, ``RLOOConfig``, ``DPOConfig``,
``RewardConfig``) or ``PPOSettings`` from the same functions the training stages call, so that the contract reads
exactly what would run; ``resolved_values`` flattens every contract key of a config. Imports TRL.
"""

from __future__ import annotations

import dataclasses
import enum
import tempfile

from thai_grpo.core.chapter import CHAPTER, TRAIN_SIZE, config_value, optimizer_steps
from thai_grpo.data.problems import SYSTEM_PROMPT

GRPO_FAMILY = ("grpo", "rloo")


def stage_arguments(config: dict, stage: str):
    """The argument object the trainer of ``stage`` (a variant name, or ``reward_model``) is built with."""
    from trl import DPOConfig, GRPOConfig, RewardConfig, RLOOConfig

    from thai_grpo.methods import variant_plan
    from thai_grpo.methods.dpo import dpo_args
    from thai_grpo.methods.ppo import ppo_settings
    from thai_grpo.methods.rloo import rloo_args
    from thai_grpo.models.training import trainer_args

    output_dir, seed = tempfile.gettempdir(), config["seed"]
    if stage == "reward_model":
        return RewardConfig(**trainer_args(config.get("reward_model", {}).get("args", {}), output_dir, seed))
    plan = variant_plan(config, stage)
    if plan["method"] == "grpo":
        return GRPOConfig(**trainer_args(plan["grpo"], output_dir, seed))
    if plan["method"] == "rloo":
        fields = {f.name for f in dataclasses.fields(RLOOConfig)}
        return RLOOConfig(**trainer_args(rloo_args(plan["grpo"], fields, plan["rloo"])[0], output_dir, seed))
    if plan["method"] == "dpo":
        fields = {f.name for f in dataclasses.fields(DPOConfig)}
        return DPOConfig(**trainer_args(dpo_args(plan["grpo"], fields, plan["dpo"])[0], output_dir, seed))
    return ppo_settings(plan["grpo"], plan["ppo"])


def rollout_steps(arguments, rows: int) -> int:
    """Optimizer steps of a GRPO or RLOO run over ``rows`` prompts with these arguments (``chapter.optimizer_steps``)."""
    return optimizer_steps(rows, arguments.num_generations, arguments.per_device_train_batch_size,
                           arguments.gradient_accumulation_steps, arguments.num_train_epochs, arguments.max_steps)


def resolved_values(config: dict) -> dict[str, object]:
    """Every contract key that ``config`` has a stage for, with the value its run would use."""
    from thai_grpo.methods import variant_plan

    values, stages = {}, {}
    for fact in CHAPTER:
        stage, field = fact.key.split(".", 1)
        if stage == "config":
            values[fact.key] = _config_default(config, field)
            continue
        if stage not in config.get("variants", {}) and not (stage == "reward_model" and _scores_by_reward_model(config)):
            continue  # a stage this config does not run
        if stage not in stages:
            stages[stage] = stage_arguments(config, stage)
        arguments = stages[stage]
        if field == "reference":
            values[fact.key] = variant_plan(config, stage)["grpo"].get("reference", "sft")
        elif field == "optimizer_steps":
            values[fact.key] = rollout_steps(arguments, config["data"]["train_size"])
        else:
            value = getattr(arguments, field)
            values[fact.key] = value.value if isinstance(value, enum.Enum) else value  # e.g. SchedulerType
    return values


def _scores_by_reward_model(config: dict) -> bool:
    """A PPO variant is scored by the learned reward model: the reward_model stage runs."""
    return any(v.get("method") == "ppo" and v.get("ppo", {}).get("score", "reward_model") == "reward_model"
               for v in config.get("variants", {}).values())


def _config_default(config: dict, dotted: str):
    """A config key's value, or the value the pipeline uses when it is unset (the offline system prompt)."""
    if dotted == "data.system_prompt":
        return config["data"].get("system_prompt", SYSTEM_PROMPT)
    if dotted in ("base.name_or_path", "sft.name_or_path") and config[dotted.split(".")[0]]["source"] == "shipped":
        return "assets/tiny-base (shipped, built by this pipeline)"
    try:
        return config_value(config, dotted)
    except KeyError:
        return None


__all__ = ["GRPO_FAMILY", "TRAIN_SIZE", "resolved_values", "rollout_steps", "stage_arguments"]
