"""The chapter's experiment as a contract: every number and choice it makes, where the chapter says so, and each run's
recorded values beside it; ``departures`` lists where they differ, with the offline default's ``OFFLINE_REASONS``."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from thai_grpo.data.prompts import SYSTEM_PROMPT as OFFLINE_SYSTEM_PROMPT

SYSTEM_PROMPT = "จงคิดทีละขั้นใน <think>...</think> แล้วจบด้วยคำตอบเป็นตัวเลขบรรทัดสุดท้าย"
TRAIN_SIZE = 128


@dataclass(frozen=True)
class Fact:
    key: str      # config.<dotted key>, or <stage>.<field>
    value: object
    source: str   # where the chapter fixes it


def _grpo_mode(stage: str, generations: int, completion: int, accumulation: int, minutes: str) -> tuple[Fact, ...]:
    mode = f"the chapter's {'full' if stage == 'grpo' else 'fast'} mode ({minutes} on a T4)"
    return (Fact(f"{stage}.num_generations", generations, f"{mode}: G completions per prompt"),
            Fact(f"{stage}.max_completion_length", completion, f"{mode}: completion budget in tokens"),
            Fact(f"{stage}.gradient_accumulation_steps", accumulation, f"{mode}: gradient accumulation"))


def _grpo_common(stage: str) -> tuple[Fact, ...]:
    where = "the chapter's hyper-parameters, both modes"
    return (
        Fact(f"{stage}.per_device_train_batch_size", 16, f"{where}: batch 16 completions per device (divisible by G)"),
        Fact(f"{stage}.temperature", 1.0, f"{where}: temperature 1.0, never lower (group diversity is the fuel)"),
        Fact(f"{stage}.top_p", 1.0, "plain sampling at the temperature: no nucleus truncation"),
        Fact(f"{stage}.top_k", 0, "plain sampling at the temperature: no top-k truncation"),
        Fact(f"{stage}.beta", 0.04, f"{where}: KL weight beta 0.04 (TRL 1.16 defaults to 0)"),
        Fact(f"{stage}.epsilon", 0.2, f"{where}: PPO's clip epsilon 0.2"),
        Fact(f"{stage}.learning_rate", 1e-6, f"{where}: learning rate 1e-6"),
        Fact(f"{stage}.num_train_epochs", 1, f"{where}: one epoch over the 128 problems"),
        Fact(f"{stage}.max_steps", -1, "one epoch and no max_steps (max_steps > 0 would override the epoch)"),
        Fact(f"{stage}.optimizer_steps", 16, "128 problems x G / 64 completions per optimizer step = 16 steps"),
        Fact(f"{stage}.logging_steps", 1, f"{where}: logging every step (TRL defaults to 10)"),
        Fact(f"{stage}.loss_type", "grpo", "the objective: per-token clipped surrogate averaged over each "
             "completion's tokens (TRL's grpo; TRL 1.16 defaults to dapo)"),
        Fact(f"{stage}.scale_rewards", "group", "group-relative advantage: divided by the group's std"),
        Fact(f"{stage}.use_bias_correction_kl", False, "plain k3 = (x - 1) - log x per sampled token (TRL 1.16's "
             "default True multiplies it by the importance ratio)"),
        Fact(f"{stage}.disable_dropout", True, "rollouts are sampled in train mode: no LoRA dropout in them nor in "
             "the KL's two passes (TRL 1.16 defaults to False)"),
        Fact(f"{stage}.reference", "base", "pi_ref = the same base with the adapter disabled: no second model"),
    )


CHAPTER: tuple[Fact, ...] = (
    Fact("config.base.name_or_path", "Qwen/Qwen3-0.6B", "the real run's policy base: Qwen/Qwen3-0.6B"),
    Fact("config.sft.name_or_path", "kobkrit/qwen3-0.6b-th-sft-lora", "the SFT LoRA adapter the policy starts from"),
    Fact("config.data.source", "hub", "the data: VISAI-AI/gsm8k-thai from the hub"),
    Fact("config.data.hub.path", "VISAI-AI/gsm8k-thai", "the data: VISAI-AI/gsm8k-thai"),
    Fact("config.data.hub.split", "train", "the data: split train"),
    Fact("config.data.question_column", "translated_question", "the question column"),
    Fact("config.data.answer_column", "translated_answer", "the worked answer, gold number after ####"),
    Fact("config.data.selection", "chapter", "the 128 problems are exactly shuffle(seed=42).select(range(128)) of "
         "the split, in that order; the held-out set is cut from the remaining rows"),
    Fact("config.data.shuffle_seed", 42, "shuffle(seed=42)"),
    Fact("config.data.train_size", TRAIN_SIZE, "select(range(128)): 128 training problems"),
    Fact("config.data.system_prompt", SYSTEM_PROMPT, "the Thai system message: think step by step inside "
         "<think>...</think>, end with the numeric answer on the last line"),
    Fact("config.rewards", ["correct", "format", "thai"], "three code rewards: correct +1.0, non-empty think "
         "block +0.3 (strict <think>.+?</think>), Thai script +0.2"),
    Fact("config.base.dtype", "auto", "frozen weights in 16 bits: float16 on a T4 (no native bf16)"),
    *_grpo_mode("grpo", 8, 256, 4, "~18 min"),
    *_grpo_common("grpo"),
    *_grpo_mode("grpo_fast", 4, 192, 2, "~10 min"),
    *_grpo_common("grpo_fast"),
    Fact("dr_grpo.loss_type", "dr_grpo", "Dr.GRPO: the same objective without the division by the group's std"),
    Fact("dr_grpo.scale_rewards", "none", "Dr.GRPO: mean subtraction kept, no division by the std"),
    Fact("dr_grpo.max_steps", -1, "the comparison: one epoch, as GRPO's"),
    Fact("dr_grpo.optimizer_steps", 16, "the comparison: GRPO's 16 optimizer steps"),
    Fact("rloo.max_steps", -1, "the comparison: one epoch, as GRPO's"),
    Fact("rloo.optimizer_steps", 16, "the comparison: GRPO's 16 optimizer steps"),
    Fact("dpo.max_steps", -1, "the comparison's rule (the chapter gives no DPO settings): one pass over the pairs"),
    Fact("dpo.num_train_epochs", 1, "the comparison's rule: one pass over the pairs"),
    Fact("dpo.lr_scheduler_type", "linear", "the comparison's rule: TRL's schedule"),
    Fact("dpo.max_length", 1024, "the comparison's rule: TRL's 1024, which holds the longest prompt plus the 256-token "
         "budget, so that no answer is cut"),
    Fact("reward_model.max_steps", -1, "the comparison's rule (the chapter gives no reward-model settings): one "
         "pass over the pairs"),
    Fact("reward_model.num_train_epochs", 1, "the comparison's rule: one pass over the pairs"),
    Fact("reward_model.lr_scheduler_type", "linear", "the comparison's rule: TRL's schedule"),
    Fact("ppo.learning_rate", 3e-6, "PPO as the chapter's series ran it: TRL 1.12's defaults, lr 3e-6"),
    Fact("ppo.num_ppo_epochs", 4, "TRL 1.12's defaults: 4 PPO epochs per batch"),
    Fact("ppo.kl_coef", 0.05, "TRL 1.12's defaults: kl_coef 0.05"),
    Fact("ppo.temperature", 0.7, "TRL 1.12's defaults: sampling temperature 0.7"),
    Fact("ppo.gamma", 1.0, "GAE with gamma 1.0"),
    Fact("ppo.lam", 0.95, "GAE with lambda 0.95"),
    Fact("ppo.cliprange", 0.2, "clipped surrogate 0.2"),
    Fact("ppo.cliprange_value", 0.2, "clipped value loss, cliprange_value 0.2"),
    Fact("ppo.vf_coef", 0.1, "value loss weight vf_coef 0.1"),
)

FACTS = {fact.key: fact for fact in CHAPTER}

# Why the offline default (a 1.1M-parameter model on 2 CPU cores) departs where it does, keyed like CHAPTER; a test
# checks that every departure has a reason and no reason outlives its departure.
OFFLINE_REASONS = {
    "config.base.name_or_path": "no hub: a 1.1M-parameter Qwen3 built here and shipped in assets/tiny-base",
    "config.sft.name_or_path": "no hub: an SFT adapter trained here on the tiny base, shipped beside it",
    "config.data.source": "no hub: synthetic Thai GSM8K-style problems made here",
    "config.data.selection": "synthetic problems share skeletons (template + operands): the held-out set is drawn "
                             "first and every problem sharing its skeletons is set aside",
    "config.data.system_prompt": "the shorter prompt the tiny tokenizer and SFT adapter were trained on",
    "config.base.dtype": "a CPU computes in float32",
    "grpo.per_device_train_batch_size": "8 prompts x 8 completions = 64 completions in one generation batch",
    "grpo.gradient_accumulation_steps": "one generation batch per optimizer step on a CPU",
    "grpo.max_completion_length": "solutions here are ~40 tokens",
    "grpo.learning_rate": "a tiny LoRA policy needs a far larger step than a 0.6B model (2e-3 drifted)",
    "grpo.max_steps": "40 steps of 64 completions = 2.5 passes over the 128 problems: the tiny policy learns "
                      "within the CPU budget",
    "grpo.optimizer_steps": "40 steps (max_steps)",
    "grpo.reference": "the tiny base never learned the chat format, so the KL is to the SFT policy GRPO starts "
                      "from (DeepSeekMath's reference)",
    "dr_grpo.max_steps": "as GRPO's: 40 steps",
    "dr_grpo.optimizer_steps": "as GRPO's: 40 steps",
    "rloo.max_steps": "as GRPO's: 40 steps",
    "rloo.optimizer_steps": "as GRPO's: 40 steps",
    "dpo.max_steps": "GRPO's 40 optimizer steps over ~110 pairs",
    "dpo.lr_scheduler_type": "GRPO's constant learning rate",
    "dpo.max_length": "prompt plus the 80-token budget fits 512 here",
    "reward_model.num_train_epochs": "2 passes over ~110 pairs (4 passes: no better on held-out pairs)",
    "reward_model.lr_scheduler_type": "a constant learning rate, as GRPO's",
    "ppo.learning_rate": "a tiny LoRA policy: GRPO's 1e-3 spread over the 4 optimizer steps of each batch",
    "ppo.num_ppo_epochs": "2 passes per batch (each costs a policy and a value forward-backward)",
    "ppo.temperature": "GRPO's rollout temperature, so that both methods sample alike",
}


def _same(value, expected) -> bool:
    if isinstance(expected, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return math.isclose(value, expected, rel_tol=1e-9)
    if isinstance(expected, list):
        return list(value) == expected if isinstance(value, (list, tuple)) else False
    return value == expected and type(value) is type(expected) if isinstance(expected, bool) else value == expected


def departures(values: dict[str, object]) -> list[dict]:
    """``{key, chapter, value, source}`` per fact of ``values`` (one run's, CHAPTER's order) unlike the chapter's."""
    return [{"key": fact.key, "chapter": fact.value, "value": values[fact.key], "source": fact.source}
            for fact in CHAPTER if fact.key in values and not _same(values[fact.key], fact.value)]


def run_card_departures(values: dict[str, object], offline: bool) -> list[dict]:
    """``departures(values)``, each with the offline default's ``reason`` when ``offline``, else None."""
    return [{**d, "reason": OFFLINE_REASONS.get(d["key"]) if offline else None} for d in departures(values)]


def recorded_values(config: dict, records: dict[str, dict]) -> dict[str, object]:
    """The same keys from what the stages recorded (``stage_records``); stages without a record are left out."""
    def stage_value(stage: str, field: str):
        return records[stage][field] if field in ("reference", "optimizer_steps") else records[stage]["args"][field]

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
        return config["data"].get("system_prompt", OFFLINE_SYSTEM_PROMPT)
    section = dotted.split(".")[0]
    if dotted in ("base.name_or_path", "sft.name_or_path") and config[section]["source"] not in ("hub", "local"):
        built = {"shipped": "assets/tiny-base (shipped, built by this pipeline)", "scratch": "pretrained here",
                 "train": "trained here"}
        return f"tiny Qwen3 {'base' if section == 'base' else 'SFT adapter'}: {built[config[section]['source']]}"
    value = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value
