"""The arguments each stage's trainer is given by a config, built by the functions the training stages call and TRL's
own argument classes: the values the chapter's contract (tests/test_chapter_contract.py) is checked against. Imports TRL.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile

from thai_grpo.analyses.chapter import contract_values, stages_run


def stage_arguments(config: dict, stage: str):
    """The argument object the trainer of ``stage`` (a variant name, or ``reward_model``) is built with."""
    from trl import DPOConfig, GRPOConfig, RewardConfig, RLOOConfig

    from thai_grpo.workflow import variant_plan
    from thai_grpo.methods.rloo import rloo_args
    from thai_grpo.methods.settings import ppo_settings
    from thai_grpo.models.training import trainer_args

    output_dir, seed, dtype = tempfile.gettempdir(), config["seed"], config["base"]["dtype"]
    if stage == "reward_model":
        return RewardConfig(**trainer_args(config.get("reward_model", {}).get("args", {}), output_dir, seed, dtype))
    plan = variant_plan(config, stage)
    if plan["method"] == "grpo":
        return GRPOConfig(**trainer_args(plan["grpo_args"], output_dir, seed, dtype))
    if plan["method"] == "rloo":
        fields = {f.name for f in dataclasses.fields(RLOOConfig)}
        return RLOOConfig(**trainer_args(rloo_args(plan["grpo_args"], fields, plan["rloo"])[0], output_dir, seed, dtype))
    if plan["method"] == "dpo":
        return DPOConfig(**trainer_args({**plan["grpo_args"], **plan["dpo"]}, output_dir, seed, dtype))
    return ppo_settings(plan["grpo_args"], plan["ppo"])


def optimizer_steps(rows: int, num_generations: int, per_device_train_batch_size: int,
                    gradient_accumulation_steps: int, num_train_epochs: float, max_steps: int,
                    num_processes: int = 1) -> int:
    """The optimizer steps of a GRPO-family run over ``rows`` prompts, counted as transformers' Trainer counts them."""
    if max_steps > 0:
        return max_steps
    per_step = per_device_train_batch_size * gradient_accumulation_steps * num_processes
    return math.ceil(num_train_epochs * math.ceil(rows * num_generations / per_step))


def rollout_steps(arguments, rows: int) -> int:
    """Optimizer steps of a GRPO or RLOO run over ``rows`` prompts with ``arguments`` (``optimizer_steps``)."""
    return optimizer_steps(rows, arguments.num_generations, arguments.per_device_train_batch_size,
                           arguments.gradient_accumulation_steps, arguments.num_train_epochs, arguments.max_steps)


def resolved_values(config: dict) -> dict[str, object]:
    """Every contract key ``config`` has a stage for, with the value its run would use (imports TRL)."""
    from thai_grpo.workflow import variant_plan

    built = {}

    def stage_value(stage: str, field: str):
        if stage not in built:
            built[stage] = stage_arguments(config, stage)
        if field == "reference":
            return variant_plan(config, stage)["grpo_args"]["reference"]
        if field == "optimizer_steps":
            return rollout_steps(built[stage], config["data"]["train_size"])
        return getattr(built[stage], field)

    return contract_values(config, stage_value, stages_run(config))
