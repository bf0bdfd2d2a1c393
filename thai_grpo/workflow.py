"""The config's truth beside ``config/schema.yaml`` (its types, defaults and docs): the one loader, the checks the schema
cannot express, each variant's plan (what its training job is given) and the shipped base's recipe. Snakemake's
process reads this module as it parses the workflow; no job imports it. It imports no torch and no TRL: TRL's field
names come from a checked-in list (``trainer_fields.json``, rewritten after an upgrade by ``python -m
thai_grpo_tools.trainer_fields``), so that ``snakemake -n`` refuses a misspelt key in one line.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
from functools import cache
from pathlib import Path

from thai_grpo.core.config import OURS, ConfigError
from thai_grpo.core.references import KL_REFERENCES
from thai_grpo.core.io import plain_json
from thai_grpo.methods import METHODS
from thai_grpo.methods.settings import PPOSettings, ppo_settings

SCHEMA = "config/schema.yaml"
# TRL 1.16's GRPOConfig.loss_type values (tests/test_config.py checks this list against the installed TRL).
TRL_LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo")
TRL_SCALE_REWARDS = ("group", "batch", "none")
RESERVED_MODEL_NAMES = ("base", "sft")


# ----------------------------------------------------------------------------------------- loading
def coerce_scalars(value):
    """Numbers and booleans given as strings become numbers and booleans, recursively: ``snakemake --config
    'grpo={"beta":0.05}'`` delivers nested values as strings."""
    import yaml

    if isinstance(value, dict):
        return {key: coerce_scalars(item) for key, item in value.items()}
    if isinstance(value, list):
        return [coerce_scalars(item) for item in value]
    if isinstance(value, str):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        if isinstance(parsed, (bool, int, float)):
            return parsed
    return value


def load_config_files(paths, schema: str | Path = SCHEMA) -> dict:
    """The config as Snakemake builds it from ``paths``: merged in order, scalars coerced, validated with the schema's
    defaults filled in (the one loader of every caller outside Snakemake: tests, tools, ``scripts/prompt.py``)."""
    import yaml
    from snakemake.utils import update_config, validate

    config: dict = {}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            update_config(config, yaml.safe_load(handle) or {})
    config = coerce_scalars(config)
    validate(config, str(Path(schema).resolve()))
    return config


def deep_merge(base: dict, overrides: dict) -> dict:
    """``base`` with ``overrides`` applied recursively (dicts merge, everything else replaces)."""
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def settings_fingerprint(config: dict) -> str:
    """The settings results were built from, in 16 hex digits: sha256 of the config as canonical JSON, without
    ``results_dir`` (where files go, not how they are made)."""
    import hashlib

    settings = {key: value for key, value in config.items() if key != "results_dir"}
    canonical = json.dumps(settings, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def eval_settings(config: dict) -> dict:
    """How held-out sets are sampled and scored: the ``eval`` section without its model list and extra sets (adding
    one resamples nothing else), ``max_new_tokens`` defaulting to ``grpo.max_completion_length``."""
    settings = {key: value for key, value in config["eval"].items() if key not in ("models", "extra_sets")}
    settings.setdefault("max_new_tokens", config.get("grpo", {}).get("max_completion_length", 256))
    return settings


def passk_settings(config: dict) -> dict:
    """How the large-k experiment samples: the eval settings with the ``passk`` section's n, batch, ks, problems."""
    passk = config["passk"]
    return {**eval_settings(config), **{key: passk[key] for key in ("num_samples", "batch_size", "ks", "problems")}}


# Keys that say where a model comes from, not how it was built: they differ between the shipped base's build and a run
# that loads it.
SOURCE_KEYS = ("source", "name_or_path", "revision")


def recipe(config: dict, system_prompt: str) -> dict:
    """The settings that build the base and the SFT adapter: seed, base:, corpus:, sft: and the system prompt."""
    def section(name):
        return {k: v for k, v in config.get(name, {}).items() if k not in SOURCE_KEYS}

    return plain_json({"seed": config["seed"], "base": section("base"), "corpus": section("corpus"),
                       "sft": section("sft"), "system_prompt": system_prompt})


# ----------------------------------------------------------------------------------------- each variant's plan
def variant_settings(config: dict, variant: str) -> dict:
    """The ``grpo`` section and reward list of one named variant (its overrides on top of the defaults)."""
    overrides = config.get("variants", {}).get(variant)
    if overrides is None:
        raise ConfigError(f"variant {variant!r} is not defined: add it under 'variants:' or use one of "
                          f"{sorted(config.get('variants', {}))}")
    return {"grpo": deep_merge(config["grpo"], overrides.get("grpo", {})),
            "rewards": list(overrides.get("rewards", config.get("rewards", ["correct", "format", "thai"])))}


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
    bookkeeping fields for DPO (never beta, the loss or the schedule: ``NOT_INHERITED``), ``PPO_FROM_GRPO`` for PPO."""
    if method == "dpo":
        return {k: v for k, v in grpo.items() if k in fields_of("DPOConfig") and k not in NOT_INHERITED}
    if method == "ppo":
        return {k: grpo[k] for k in PPO_FROM_GRPO if k in grpo}
    return dict(grpo)


# ----------------------------------------------------------------------------------------- the checks
# Why GRPO's rollouts never go through vLLM here (TRL 1.16, colocate mode with a PeftModel).
VLLM_ROLLOUTS_INEXACT = (
    "TRL 1.16 syncs a LoRA policy to vLLM by merging the adapter into the 16-bit base weights and unmerging it every "
    "step, which does not round-trip in 16 bits (the frozen base, and with it the KL reference, drifts), turns on "
    "vllm_importance_sampling_correction (an importance ratio in the loss: not the chapter's objective) and seeds "
    "vLLM with the process index, not the config's seed")
# Held-out sampling's precision (eval.dtype), which vLLM must sample in too.
EXACT_EVAL_DTYPE = "float32"


def _check_grpo(grpo: dict, where: str) -> None:
    g = grpo.get("num_generations", 8)
    if not isinstance(g, int) or g < 2:
        raise ConfigError(f"{where}.num_generations={g!r}: GRPO needs at least 2 completions per prompt to "
                          "compare them; use 4 or 8")
    batch = grpo.get("per_device_train_batch_size", 8) * grpo.get("gradient_accumulation_steps", 1)
    batch *= grpo.get("num_processes", 1)
    if batch % g:
        raise ConfigError(f"{where}: per_device_train_batch_size x gradient_accumulation_steps = {batch} is not "
                          f"divisible by num_generations={g}: make the batch a multiple of {g}")
    temperature = grpo.get("temperature", 1.0)
    if temperature <= 0:
        raise ConfigError(f"{where}.temperature={temperature!r} must be > 0: sampling at 0 makes every group "
                          "identical (no learning signal); the chapter uses 1.0")
    beta = grpo.get("beta", 0.0)
    if not isinstance(beta, (int, float)) or beta < 0:
        raise ConfigError(f"{where}.beta={beta!r} must be >= 0: it weights the KL penalty (0 turns it off; the "
                          "chapter uses 0.04)")
    if grpo.get("loss_type", "grpo") not in TRL_LOSS_TYPES:
        raise ConfigError(f"{where}.loss_type={grpo['loss_type']!r} is not a TRL loss type: use one of "
                          f"{', '.join(TRL_LOSS_TYPES)}")
    reference = grpo.get("reference", "sft")
    if reference not in KL_REFERENCES:
        raise ConfigError(f"{where}.reference={reference!r}: use base (the base model with the adapter disabled, the "
                          "chapter's) or sft (a frozen copy of the starting adapter)")
    scale = grpo.get("scale_rewards", "group")
    if scale not in TRL_SCALE_REWARDS and not isinstance(scale, bool):
        raise ConfigError(f"{where}.scale_rewards={scale!r}: use one of {', '.join(TRL_SCALE_REWARDS)}")
    if grpo.get("use_vllm", False):
        raise ConfigError(f"{where}.use_vllm: true is refused: {VLLM_ROLLOUTS_INEXACT}; remove use_vllm (rollouts "
                          "through transformers' generate, the chapter's path; docs/real-run.md, 'vLLM')")


def _check_data(data: dict, sft_source: str) -> None:
    sizes = {"train_size": data["train_size"], "heldout_size": data["heldout_size"],
             "sft_size": data.get("sft_size", 0) if sft_source in ("train", "shipped") else 0}
    if data["source"] == "synthetic":
        available = data.get("synthetic", {}).get("num_problems", 6000)
        if sum(sizes.values()) > available:
            listed = " + ".join(f"{k}={v}" for k, v in sizes.items())
            raise ConfigError(f"data: {listed} = {sum(sizes.values())} exceeds data.synthetic.num_problems="
                              f"{available}: lower the sizes or raise num_problems")
    if sft_source in ("train", "shipped") and sizes["sft_size"] < 1:
        raise ConfigError(f"data.sft_size must be >= 1 when sft.source={sft_source}: the SFT adapter needs examples")


def check_batch_size(value, where: str) -> None:
    """A sampling batch size is a positive integer or ``auto`` (sized to the job's GPU)."""
    if value != "auto" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{where}={value!r}: use a positive integer (problems per generate call) or auto (the most "
                          "the memory plan fits on the job's GPU)")


def _check_eval(config: dict) -> None:
    ev = config["eval"]
    check_batch_size(ev.get("batch_size", 32), "eval.batch_size")
    check_batch_size(config["passk"]["batch_size"], "passk.batch_size")
    n = ev.get("num_samples", 8)
    too_large = [k for k in ev.get("ks", [1, 8]) if k > n]
    if too_large:
        raise ConfigError(f"eval.ks={ev.get('ks')} has k={too_large[0]} > eval.num_samples={n}: pass@k needs "
                          f"n >= k; raise num_samples or drop k")
    if ev.get("temperature", 1.0) <= 0:
        raise ConfigError(f"eval.temperature={ev['temperature']!r} must be > 0 (greedy accuracy is reported "
                          "separately)")
    eval_dtype = ev.get("dtype", EXACT_EVAL_DTYPE)
    if ev.get("use_vllm", False) and eval_dtype != EXACT_EVAL_DTYPE:
        raise ConfigError(f"eval.use_vllm: true with eval.dtype={eval_dtype}: vLLM would sample in {eval_dtype}, "
                          f"whose rounding is as large as the trained update; set eval.dtype: {EXACT_EVAL_DTYPE} "
                          "(vLLM then samples in float32) or eval.use_vllm: false")
    known = set(RESERVED_MODEL_NAMES) | set(config.get("variants", {}))
    unknown = [m for m in ev.get("models", []) if m not in known]
    if unknown:
        raise ConfigError(f"eval.models has {unknown[0]!r}, which is neither base, sft nor a variant: "
                          f"use one of {sorted(known)}")


def _check_chains(config: dict) -> None:
    known = {"sft"} | set(config.get("variants", {}))
    unknown = [m for m in config.get("chains", {}).get("models", []) if m not in known]
    if unknown:
        raise ConfigError(f"chains.models has {unknown[0]!r}, which is neither sft nor a variant: use some of "
                          f"{sorted(known)}")


def _check_rewards(names: list[str], where: str) -> None:
    """Every reward name is an entry of ``thai_grpo.core.rewards.REWARDS``."""
    from thai_grpo.core.rewards import REWARDS

    unknown = [name for name in names if name not in REWARDS]
    if unknown:
        raise ConfigError(f"{where}: unknown reward {unknown[0]!r}; use one of {', '.join(REWARDS)} (a new reward is "
                          "an entry of thai_grpo.core.rewards.REWARDS)")


# TRL's mixed-precision flags and the dtype of the frozen weights each one autocasts to.
PRECISION_FLAGS = {"fp16": "float16", "bf16": "bfloat16"}
# training.report_to: TRL's tracker names and the package each one needs.
TRACKER_PACKAGES = {"tensorboard": "tensorboard", "trackio": "trackio", "wandb": "wandb"}


# The trainer config class each section of a variant gives its fields to.
VARIANT_CLASSES = {"grpo": "GRPOConfig", "rloo": "RLOOConfig", "dpo": "DPOConfig"}


def trainer_sections(config: dict) -> list[tuple[str, dict, str, str]]:
    """(where, fields, the class that takes them, dtype of the frozen weights) for every config section whose fields
    reach a TRL or transformers trainer."""
    dtype = config["base"].get("dtype", "float32")
    sections = [("grpo", config["grpo"], "GRPOConfig", dtype),
                ("sft.args", config["sft"].get("args", {}), "SFTConfig", dtype),
                ("base.pretrain", config["base"].get("pretrain", {}), "TrainingArguments", "float32"),
                ("reward_model.args", config.get("reward_model", {}).get("args", {}), "RewardConfig", dtype)]
    for name, variant in config.get("variants", {}).items():
        sections += [(f"variants.{name}.{key}", variant.get(key, {}), cls, dtype) for key, cls in VARIANT_CLASSES.items()]
    return sections


def _check_precision(config: dict) -> None:
    """One precision per stage: a section's fp16/bf16 flag agrees with base.dtype; with ``auto`` (per card) none."""
    for where, section, _, dtype in trainer_sections(config):
        for flag, flag_dtype in PRECISION_FLAGS.items():
            if flag not in section:
                continue
            if dtype == "auto":
                raise ConfigError(f"{where}.{flag}={section[flag]}: the trainers' fp16/bf16 follow base.dtype, and "
                                  f"auto picks them per card (float16 on a T4, bfloat16 from compute capability 8.0); "
                                  f"remove {where}.{flag}, or set base.dtype: {flag_dtype} to force it")
            if bool(section[flag]) != (dtype == flag_dtype):
                autocast = f"under {flag_dtype} autocast" if section[flag] else f"without {flag_dtype} autocast"
                raise ConfigError(f"{where}.{flag}={section[flag]} would train {dtype} weights {autocast}: one "
                                  f"precision per stage; remove {where}.{flag} (the trainers' precision follows "
                                  "base.dtype) or change base.dtype")


def _check_training(config: dict) -> None:
    """``training.report_to`` names an installed tracker; no trainer section sets its own."""
    import importlib.util

    report_to = config.get("training", {}).get("report_to", "none")
    package = TRACKER_PACKAGES.get(report_to)
    if package and importlib.util.find_spec(package) is None:
        raise ConfigError(f"training.report_to={report_to}: the {package} package is not installed here; install it "
                          f"(pip install {package}) or set training.report_to: none")
    for where, section, _, _ in trainer_sections(config):
        if "report_to" in section:
            raise ConfigError(f"{where}.report_to: every trainer reports to training.report_to (PPO's metrics too); "
                              f"remove it from {where} and set training.report_to")


def check_config(config: dict) -> None:
    """Every check beyond the schema (``config`` already validated); raise ``ConfigError`` on the first problem."""
    clash = [v for v in config.get("variants", {}) if v in RESERVED_MODEL_NAMES]
    if clash:
        raise ConfigError(f"variants.{clash[0]}: 'base' and 'sft' name the starting models; rename the variant")
    _check_data(config["data"], config["sft"]["source"])
    _check_grpo(config["grpo"], "grpo")
    _check_rewards(config.get("rewards") or [], "rewards")
    for name in config.get("variants", {}):
        _check_grpo(variant_settings(config, name)["grpo"], f"variants.{name}.grpo")
        _check_rewards(variant_settings(config, name)["rewards"], f"variants.{name}.rewards")
    _check_eval(config)
    _check_chains(config)
    _check_precision(config)
    _check_training(config)
    if (config["base"]["source"] == "shipped") != (config["sft"]["source"] == "shipped"):
        raise ConfigError(f"base.source={config['base']['source']} with sft.source={config['sft']['source']}: the "
                          "shipped SFT adapter was trained on the shipped base; set both to shipped, or base.source: "
                          "scratch with sft.source: train")
    for section in ("base", "sft"):
        if config[section]["source"] in ("hub", "local") and not config[section].get("name_or_path"):
            raise ConfigError(f"{section}.source={config[section]['source']} needs {section}.name_or_path "
                              "(a hub id or a folder)")
    check_trainer_fields(config)
    check_method_fields(config)


def check_trainer_fields(config: dict) -> None:
    """Refuse keys the trainers' config classes do not have, naming the nearest valid one (``trainer_sections``);
    ``ppo:`` sections against ``PPOSettings``."""
    ours = {"GRPOConfig": set(OURS), "TrainingArguments": {"num_processes", "max_length"}}  # max_length: the cut
    for where, fields, cls, _ in trainer_sections(config):
        library = "transformers" if cls == "TrainingArguments" else "TRL"
        refusal = unknown_key(fields, fields_of(cls) | ours.get(cls, set()), where, f"{library} {cls}")
        if refusal:
            raise ConfigError(refusal)
    ppo_fields = frozenset(f.name for f in dataclasses.fields(PPOSettings))
    for name, variant in config.get("variants", {}).items():
        refusal = unknown_key(variant.get("ppo", {}), ppo_fields, f"variants.{name}.ppo",
                              "thai_grpo.methods.settings.PPOSettings")
        if refusal:
            raise ConfigError(refusal)


# ----------------------------------------------------------------------------------------- each method's fields
TRL_MAX_LENGTH = 1024  # DPOConfig's default max_length
# Shared names that mean something else in DPO: GRPO's beta is a KL weight, its loss_type a policy-gradient loss, its
# batch size counts completions (DPO's: pairs), and its steps count rollout batches, so DPO takes TRL's schedule (one
# epoch, linear decay) unless its dpo: section sets one.
SCHEDULE = ("max_steps", "num_train_epochs", "gradient_accumulation_steps", "learning_rate", "lr_scheduler_type",
            "warmup_steps", "warmup_ratio")
NOT_INHERITED = ("beta", "loss_type", "per_device_train_batch_size", *SCHEDULE)


def check_max_length_in_config(config: dict) -> None:
    """``dpo.check_max_length`` from the config alone: each DPO variant's ``max_length`` (TRL's 1024 when unset)
    must exceed ``grpo.max_completion_length``; the longest prompt is checked when the job starts."""
    budget = config["grpo"]["max_completion_length"]
    for name, variant in config.get("variants", {}).items():
        if variant.get("method") != "dpo":
            continue
        max_length = variant.get("dpo", {}).get("max_length", TRL_MAX_LENGTH)
        if max_length is not None and max_length <= budget:
            raise ConfigError(f"variants.{name}.dpo.max_length={max_length} leaves no room for a prompt beside the "
                              f"pairs' completion budget (grpo.max_completion_length={budget}): set it to at least "
                              f"the longest prompt plus {budget} (TRL's default is {TRL_MAX_LENGTH})")


def check_method_fields(config: dict) -> None:
    """Refuse a method section (``rloo:``, ``dpo:``, ``ppo:``) on a variant of another method, a DPO max_length with
    no room for a prompt, PPO settings ``PPOSettings`` refuses, and GRPO-only overrides in an RLOO variant (silently
    ignored)."""
    check_max_length_in_config(config)
    for name, overrides in config.get("variants", {}).items():
        method = overrides.get("method", "grpo")
        for section in ("rloo", "dpo", "ppo"):
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


# ----------------------------------------------------------------------------------------- TRL's field names
FIELDS_FILE = Path(__file__).with_name("trainer_fields.json")


@cache
def known_fields() -> dict:
    """The checked-in list of TRL's and transformers' field names (``trainer_fields.json``)."""
    return json.loads(FIELDS_FILE.read_text(encoding="utf-8"))


def fields_of(cls: str) -> frozenset[str]:
    """The field names of one trainer config class, from the checked-in list."""
    return frozenset(known_fields()["fields"][cls])


def unknown_key(section: dict, known, where: str, owner: str) -> str | None:
    """A one-line refusal for the first key of ``section`` not in ``known``, naming the nearest valid one, or None."""
    unknown = sorted(set(section or {}) - set(known))
    if not unknown:
        return None
    nearest = difflib.get_close_matches(unknown[0], sorted(known), n=1)
    hint = f"did you mean {nearest[0]}?" if nearest else "check the spelling against its documentation"
    return f"{where}.{unknown[0]} is not a field of {owner}: {hint}"

