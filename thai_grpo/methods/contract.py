"""The chapter's contract (``thai_grpo.core.chapter``) read from what a run's stages recorded: each key's value, for the
run card to set beside the chapter's. (What a config would give, from the trainers' own argument classes, is
``thai_grpo_tools.trainer_arguments``.)
"""

from __future__ import annotations

import enum

from thai_grpo.core.chapter import CHAPTER, config_value
from thai_grpo.data.prompts import SYSTEM_PROMPT

def recorded_values(config: dict, records: dict[str, dict]) -> dict[str, object]:
    """The same keys from what the stages recorded: ``records[stage]`` = ``{"args": the trainer's arguments as a dict,
    "reference", "optimizer_steps"}``; stages without a record are left out."""

    def stage_value(stage: str, field: str):
        record = records[stage]
        if field in ("reference", "optimizer_steps"):
            return record[field]
        return record["args"][field]

    return contract_values(config, stage_value, [stage for stage in stages_run(config) if stage in records])


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


def contract_values(config: dict, stage_value, stages) -> dict[str, object]:
    """Every contract key of ``stages`` (and the config's own), each from ``stage_value(stage, field)``."""
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


def stages_run(config: dict) -> list[str]:
    """The contract's stages that ``config`` runs: its variants, and the reward model when a PPO variant uses it."""
    variants = config.get("variants", {})
    scored = any(v.get("method") == "ppo" and v.get("ppo", {}).get("score", "reward_model") == "reward_model"
                 for v in variants.values())  # a PPO variant is scored by the learned reward model
    return [*variants, *(["reward_model"] if scored else [])]


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
