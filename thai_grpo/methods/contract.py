"""What each stage's trainer is given by a config, built by the same functions the training stages call: the values the
chapter's contract (``thai_grpo.core.chapter``) is checked against. Imports TRL.
"""

from __future__ import annotations

import dataclasses
import enum
import tempfile

from thai_grpo.core.chapter import CHAPTER, TRAIN_SIZE, config_value, optimizer_steps
from thai_grpo.data.prompts import SYSTEM_PROMPT

def stage_arguments(config: dict, stage: str):
    """The argument object the trainer of ``stage`` (a variant name, or ``reward_model``) is built with."""
    from trl import DPOConfig, GRPOConfig, RewardConfig, RLOOConfig

    from thai_grpo.methods import variant_plan
    from thai_grpo.methods.settings import dpo_args, ppo_settings, rloo_args
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
        fields = {f.name for f in dataclasses.fields(DPOConfig)}
        return DPOConfig(**trainer_args(dpo_args(plan["grpo_args"], fields, plan["dpo"])[0], output_dir, seed, dtype))
    return ppo_settings(plan["grpo_args"], plan["ppo"])


def rollout_steps(arguments, rows: int) -> int:
    """Optimizer steps of a GRPO or RLOO run over ``rows`` prompts with ``arguments`` (``chapter.optimizer_steps``)."""
    return optimizer_steps(rows, arguments.num_generations, arguments.per_device_train_batch_size,
                           arguments.gradient_accumulation_steps, arguments.num_train_epochs, arguments.max_steps)


def resolved_values(config: dict) -> dict[str, object]:
    """Every contract key ``config`` has a stage for, with the value its run would use (imports TRL)."""
    from thai_grpo.methods import variant_plan

    built = {}

    def stage_value(stage: str, field: str):
        if stage not in built:
            built[stage] = stage_arguments(config, stage)
        if field == "reference":
            return variant_plan(config, stage)["grpo_args"]["reference"]
        if field == "optimizer_steps":
            return rollout_steps(built[stage], config["data"]["train_size"])
        return getattr(built[stage], field)

    return _values(config, stage_value, _stages_run(config))


def recorded_values(config: dict, records: dict[str, dict]) -> dict[str, object]:
    """The same keys from what the stages recorded: ``records[stage]`` = ``{"args": the trainer's arguments as a dict,
    "reference", "optimizer_steps"}``; stages without a record are left out."""

    def stage_value(stage: str, field: str):
        record = records[stage]
        if field in ("reference", "optimizer_steps"):
            return record[field]
        return record["args"][field]

    return _values(config, stage_value, [stage for stage in _stages_run(config) if stage in records])


def stage_records(trains: dict[str, dict], reward_model_train: dict | None = None) -> dict[str, dict]:
    """``recorded_values``' records from the train rule's ``train.json`` files and the reward model's JSON."""
    records = {}
    for stage, train in trains.items():
        args = train.get("resolved_args") or (train.get("args") if train.get("method") == "ppo" else None)
        if args is not None:
            records[stage] = {"args": args, **{key: train[key] for key in ("reference", "optimizer_steps")
                                               if key in train}}
    if reward_model_train and reward_model_train.get("resolved_args"):
        records["reward_model"] = {"args": reward_model_train["resolved_args"]}
    return records


def _values(config: dict, stage_value, stages) -> dict[str, object]:
    values = {}
    for fact in CHAPTER:
        stage, field = fact.key.split(".", 1)
        if stage == "config":
            values[fact.key] = _config_default(config, field)
        elif stage in stages:
            try:
                value = stage_value(stage, field)
            except KeyError:
                continue  # not recorded (e.g. a DPO run skipped for want of pairs)
            values[fact.key] = value.value if isinstance(value, enum.Enum) else value  # e.g. SchedulerType
    return values


def _stages_run(config: dict) -> list[str]:
    """The contract's stages that ``config`` runs: its variants, and the reward model when a PPO variant uses it."""
    return [*config.get("variants", {}), *(["reward_model"] if _scores_by_reward_model(config) else [])]


def _scores_by_reward_model(config: dict) -> bool:
    """A PPO variant is scored by the learned reward model: the reward_model stage runs."""
    return any(v.get("method") == "ppo" and v.get("ppo", {}).get("score", "reward_model") == "reward_model"
               for v in config.get("variants", {}).values())


def _config_default(config: dict, dotted: str):
    """A config key's value, or the value the pipeline uses when it is unset (the offline system prompt)."""
    if dotted == "data.system_prompt":
        return config["data"].get("system_prompt", SYSTEM_PROMPT)
    section = dotted.split(".")[0]
    if dotted in ("base.name_or_path", "sft.name_or_path") and config[section]["source"] not in ("hub", "local"):
        built = {"shipped": "assets/tiny-base (shipped, built by this pipeline)", "scratch": "pretrained here",
                 "train": "trained here"}
        return f"tiny Qwen3 {'base' if section == 'base' else 'SFT adapter'}: {built[config[section]['source']]}"
    try:
        return config_value(config, dotted)
    except KeyError:
        return None


__all__ = ["TRAIN_SIZE", "recorded_values", "resolved_values", "rollout_steps", "stage_arguments"]
