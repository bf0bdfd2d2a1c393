"""Beside ``config/schema.yaml`` (types, defaults, allowed values, docs): the one loader, the checks the schema cannot
express, each variant's plan and the studies' runs; only Snakemake's process reads it. No torch, no TRL: TRL's field
names are ``trainer_fields.json``'s (``python -m thai_grpo_tools.trainer_fields`` rewrites it after an upgrade)."""

from __future__ import annotations

import copy
import difflib
import importlib.util
import json
from functools import cache
from pathlib import Path

from thai_grpo.core.config import OURS, ConfigError
from thai_grpo.core.io import plain_json
from thai_grpo.core.seeds import parse_run, run_id, sampling_seed

SCHEMA = "config/schema.yaml"
FIELDS_FILE = Path(__file__).with_name("trainer_fields.json")


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
        return parsed if isinstance(parsed, (bool, int, float)) else value
    return value


def schema_refusal(error) -> str:
    """One line for a jsonschema ``ValidationError``: the dotted key, its value, what is wrong and the fix (the failing
    part's ``description``; for an unknown key, the nearest valid one)."""
    key = ".".join(str(part) for part in error.absolute_path)
    fix = " ".join(error.schema.get("description", "").split()) if isinstance(error.schema, dict) else ""
    if error.validator == "additionalProperties":
        owner = error.schema.get("title", f"{key or 'the config'} in {SCHEMA}")
        return unknown_key(error.instance, error.schema.get("properties", {}), key, owner)
    if error.validator not in ("const", "not", "anyOf") or not fix:  # these descriptions say what is wrong and the fix
        fix = "; ".join(filter(None, [error.message, fix]))
    if error.validator in ("required", "dependentRequired"):
        return f"{key}: {error.message}"
    if "propertyNames" in error.absolute_schema_path:
        return f"{key}.{error.instance}: {fix}"
    return f"{key}={error.instance!r}: {fix}"


def checked_config(config: dict, schema: str | Path = SCHEMA) -> dict:
    """``config`` with scalars coerced and the schema's defaults filled in, after every check: the schema's, then
    ``check_config``'s; ``ConfigError`` in one line on the first problem."""
    import jsonschema
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    config = coerce_scalars(config)
    try:
        validate(config, str(Path(schema).resolve()))
    except WorkflowError as error:  # Snakemake raises it from the schema's ValidationError
        if not isinstance(error.__context__, jsonschema.ValidationError):
            raise  # not a value the schema refused (e.g. an unreadable schema): Snakemake's own message
        raise ConfigError(schema_refusal(error.__context__)) from None
    check_config(config)
    return config


def load_config_files(paths, schema: str | Path = SCHEMA) -> dict:
    """The config as Snakemake builds it from ``paths`` (merged in order, then ``checked_config``): the one loader of
    every caller outside Snakemake (tests, tools, ``scripts/prompt.py``)."""
    import yaml

    config: dict = {}
    for path in paths:
        config = deep_merge(config, yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {})
    return checked_config(config, schema)


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


def recipe(config: dict, system_prompt: str) -> dict:
    """The settings that build the base and the SFT adapter: seed, base:, corpus:, sft: and the system prompt, less
    where the models come from (source, name_or_path, revision differ between the shipped build and its loader)."""
    def section(name):
        return {k: v for k, v in config.get(name, {}).items() if k not in ("source", "name_or_path", "revision")}

    return plain_json({"seed": config["seed"], "base": section("base"), "corpus": section("corpus"),
                       "sft": section("sft"), "system_prompt": system_prompt})


def variant_settings(config: dict, variant: str) -> dict:
    """The ``grpo`` section and reward list of one named variant (its overrides on top of the defaults)."""
    overrides = config.get("variants", {}).get(variant)
    if overrides is None:
        raise ConfigError(f"variant {variant!r} is not defined: add it under 'variants:' or use one of "
                          f"{sorted(config.get('variants', {}))}")
    return {"grpo": deep_merge(config["grpo"], overrides.get("grpo", {})),
            "rewards": list(overrides.get("rewards", config["rewards"]))}


def variant_plan(config: dict, variant: str) -> dict:
    """What the training rule needs for one variant and nothing more (the rule's params, so a knob reruns only the
    variants that read it): method, group, rewards, the method's own overrides and ``method_grpo_args``."""
    settings, overrides = variant_settings(config, variant), config["variants"][variant]
    method = overrides["method"]
    return {"variant": variant, "method": method, "group": overrides["group"],
            "grpo_args": method_grpo_args(method, settings["grpo"]),
            "rewards": [] if method == "dpo" else settings["rewards"],  # DPO's pairs are ranked by correctness alone
            "rloo": dict(overrides.get("rloo", {})), "dpo": dict(overrides.get("dpo", {})),
            "ppo": dict(overrides.get("ppo", {}))}


# What PPO takes from a merged grpo section: it samples as GRPO does, and its frozen reference is GRPO's KL reference.
PPO_FROM_GRPO = ("temperature", "max_completion_length", "reference", "chat_template_kwargs")
# Shared names that mean something else in DPO: GRPO's beta is a KL weight, its loss_type a policy-gradient loss, its
# batch size counts completions (DPO's: pairs), and its steps count rollout batches, so DPO takes TRL's schedule (one
# epoch, linear decay) unless its dpo: section sets one.
SCHEDULE = ("max_steps", "num_train_epochs", "gradient_accumulation_steps", "learning_rate", "lr_scheduler_type",
            "warmup_steps", "warmup_ratio")
NOT_INHERITED = ("beta", "loss_type", "per_device_train_batch_size", *SCHEDULE)


def method_grpo_args(method: str, grpo: dict) -> dict:
    """The part of a merged ``grpo`` section that ``method``'s trainer reads: all of it for GRPO and RLOO, the inherited
    bookkeeping fields for DPO (never beta, the loss or the schedule: ``NOT_INHERITED``), ``PPO_FROM_GRPO`` for PPO."""
    if method == "dpo":
        return {k: v for k, v in grpo.items() if k in fields_of("DPOConfig") and k not in NOT_INHERITED}
    if method == "ppo":
        return {k: grpo[k] for k in PPO_FROM_GRPO if k in grpo}
    return dict(grpo)


def check_config(config: dict) -> None:
    """Every check the schema cannot express (``config`` validated by it); ``ConfigError`` on the first problem."""
    variants = config.get("variants", {})
    for where, grpo in [("grpo", config["grpo"])] + [(f"variants.{v}.grpo", variant_settings(config, v)["grpo"])
                                                      for v in variants]:
        g, batch = grpo["num_generations"], grpo["per_device_train_batch_size"] * grpo["gradient_accumulation_steps"]
        if (batch * grpo.get("num_processes", 1)) % g:
            raise ConfigError(f"{where}: per_device_train_batch_size x gradient_accumulation_steps = {batch} is not "
                              f"divisible by num_generations={g}: make the batch a multiple of {g}")
    data = config["data"]
    sizes = {"train_size": data["train_size"], "heldout_size": data["heldout_size"],
             "sft_size": data["sft_size"] if config["sft"]["source"] in ("train", "shipped") else 0}
    available = data["synthetic"]["num_problems"]
    if data["source"] == "synthetic" and sum(sizes.values()) > available:
        raise ConfigError(f"data: {' + '.join(f'{k}={v}' for k, v in sizes.items())} = {sum(sizes.values())} exceeds "
                          f"data.synthetic.num_problems={available}: lower the sizes or raise num_problems")
    ev = config["eval"]
    too_large = [k for k in ev["ks"] if k > ev["num_samples"]]
    if too_large:
        raise ConfigError(f"eval.ks={ev['ks']} has k={too_large[0]} > eval.num_samples={ev['num_samples']}: pass@k "
                          "needs n >= k; raise num_samples or drop k")
    for where, models, known in [("eval.models", ev["models"], {"base", "sft", *variants}),
                                 ("chains.models", config["chains"].get("models", []), {"sft", *variants})]:
        unknown = [m for m in models if m not in known]
        if unknown:
            raise ConfigError(f"{where} has {unknown[0]!r}, which names no model here: use one of {sorted(known)}")
    tracker = config["training"]["report_to"]  # TRL's tracker names are their packages' names
    if tracker != "none" and importlib.util.find_spec(tracker) is None:
        raise ConfigError(f"training.report_to={tracker}: the {tracker} package is not installed here; install it "
                          f"(pip install {tracker}) or set training.report_to: none")
    check_trainer_fields(config)
    check_method_fields(config)


# The trainer config class each section of a variant gives its fields to.
VARIANT_CLASSES = {"grpo": "GRPOConfig", "rloo": "RLOOConfig", "dpo": "DPOConfig"}


def check_trainer_fields(config: dict) -> None:
    """Refuse a key of a section that reaches a TRL or transformers trainer which its config class does not have,
    naming the nearest valid one."""
    ours = {"GRPOConfig": set(OURS), "TrainingArguments": {"num_processes", "max_length"}}  # max_length: the cut
    sections = [("grpo", config["grpo"], "GRPOConfig"), ("sft.args", config["sft"].get("args", {}), "SFTConfig"),
                ("base.pretrain", config["base"].get("pretrain", {}), "TrainingArguments"),
                ("reward_model.args", config.get("reward_model", {}).get("args", {}), "RewardConfig")]
    for name, variant in config.get("variants", {}).items():
        sections += [(f"variants.{name}.{key}", variant.get(key, {}), cls) for key, cls in VARIANT_CLASSES.items()]
    for where, fields, cls in sections:
        library = "transformers" if cls == "TrainingArguments" else "TRL"
        refusal = unknown_key(fields, fields_of(cls) | ours.get(cls, set()), where, f"{library} {cls}")
        if refusal:
            raise ConfigError(refusal)


TRL_MAX_LENGTH = 1024  # DPOConfig's default max_length


def check_max_length_in_config(config: dict) -> None:
    """``dpo.check_max_length`` from the config alone: each DPO variant's ``max_length`` (TRL's 1024 when unset)
    must exceed ``grpo.max_completion_length``; the longest prompt is checked when the job starts."""
    budget = config["grpo"]["max_completion_length"]
    for name, variant in config.get("variants", {}).items():
        max_length = variant.get("dpo", {}).get("max_length", TRL_MAX_LENGTH)
        if variant.get("method") == "dpo" and max_length is not None and max_length <= budget:
            raise ConfigError(f"variants.{name}.dpo.max_length={max_length} leaves no room for a prompt beside the "
                              f"pairs' completion budget (grpo.max_completion_length={budget}): set it to at least "
                              f"the longest prompt plus {budget} (TRL's default is {TRL_MAX_LENGTH})")


def check_method_fields(config: dict) -> None:
    """Refuse a DPO max_length with no room for a prompt, a PPO batch its minibatches do not divide, and GRPO-only
    overrides in an RLOO variant (silently ignored)."""
    check_max_length_in_config(config)
    for name, overrides in config.get("variants", {}).items():
        ppo = overrides.get("ppo", {})
        if "num_mini_batches" in ppo and ppo["batch_size"] % ppo["num_mini_batches"]:  # the schema: both given
            raise ConfigError(f"variants.{name}.ppo.batch_size={ppo['batch_size']} is not a multiple of "
                              f"num_mini_batches={ppo['num_mini_batches']}: pick sizes that divide")
        grpo_only = sorted(set(overrides.get("grpo", {})) - fields_of("RLOOConfig") - set(OURS))
        if overrides.get("method") == "rloo" and grpo_only:
            raise ConfigError(f"variants.{name}.grpo.{grpo_only[0]} has no RLOO counterpart (RLOOConfig has no "
                              "such field) and would be ignored: remove it from this RLOO variant")


@cache
def known_fields() -> dict:
    """The checked-in list of TRL's and transformers' field names (``trainer_fields.json``)."""
    return json.loads(FIELDS_FILE.read_text(encoding="utf-8"))


def fields_of(cls: str) -> frozenset[str]:
    return frozenset(known_fields()["fields"][cls])


def unknown_key(section: dict, known, where: str, owner: str) -> str | None:
    """A one-line refusal for the first key of ``section`` not in ``known``, naming the nearest valid one, or None."""
    unknown = sorted(set(section or {}) - set(known))
    if not unknown:
        return None
    nearest = difflib.get_close_matches(unknown[0], sorted(known), n=1)
    hint = f"did you mean {nearest[0]}?" if nearest else "check the spelling against its documentation"
    return f"{where + '.' if where else ''}{unknown[0]} is not a field of {owner}: {hint}"


# Methods trained on fixed data, with no rollouts a training seed could move: the seed study leaves them out.
OFFLINE_METHODS = ("dpo",)
LOSS_BASELINE = "grpo"  # the chapter's loss: every loss variant is compared with it at the same seeds


def _runs(config: dict, variants: list[str]) -> dict[str, list[str]]:
    """Per variant, its run ids in ``seeds.training`` order (absent: the config's seed alone)."""
    default = int(config.get("seed", 42))
    return {v: [run_id(v, int(s), default) for s in config.get("seeds", {}).get("training", [default])]
            for v in variants}


def seed_runs(config: dict) -> dict[str, list[str]]:
    """The seed study's runs: the RL rows of the method comparison (group: method), in config order."""
    return _runs(config, [v for v, o in config.get("variants", {}).items() if o.get("group", "method") == "method"
                          and o.get("method", "grpo") not in OFFLINE_METHODS])


def loss_runs(config: dict) -> dict[str, list[str]]:
    """The loss-family study's runs: the baseline ``grpo``, then every ``group: losses`` variant in config order."""
    variants = [v for v, o in config.get("variants", {}).items() if o.get("group") == "losses"]
    if variants and LOSS_BASELINE not in config.get("variants", {}):
        raise ConfigError(f"variants.{LOSS_BASELINE} is missing: the loss-family study compares every group: losses "
                          f"variant with it; add '{LOSS_BASELINE}: {{group: method}}' under variants")
    return _runs(config, [LOSS_BASELINE, *variants])


def run_eval_settings(settings: dict, model: str, variants, default: int) -> dict:
    """The eval settings a model or run samples with: a seed-study run's own ``sampling_seed``, else unchanged."""
    try:
        _, training_seed = parse_run(model, variants, default)
    except ValueError:
        return settings
    seed = sampling_seed(settings["seed"], training_seed, default)
    return settings if seed == settings["seed"] else {**settings, "seed": seed}
