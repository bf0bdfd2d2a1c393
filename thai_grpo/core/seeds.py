"""Training-seed runs: which runs the seed study trains, and how a run id names one (``grpo``, ``grpo-seed1``).

Each run samples the held-out set with its own seed: with a shared one, similar models would draw mostly the same
completions and the seed-to-seed spread would leave out most of the evaluation noise.
"""

from __future__ import annotations

import re

from thai_grpo.core.config import ConfigError

SEED_MARK = "-seed"
# Methods trained on fixed data, with no rollouts a training seed could move: the seed study leaves them out.
OFFLINE_METHODS = ("dpo",)
_RUN = re.compile(rf"^(?P<variant>.+?)(?:{SEED_MARK}(?P<seed>\d+))?$")


def default_seed(config: dict) -> int:
    return int(config.get("seed", 42))


def training_seeds(config: dict) -> list[int]:
    """``seeds.training``; absent = the config's seed alone (no seed study)."""
    return [int(s) for s in config.get("seeds", {}).get("training", [default_seed(config)])]


def run_id(variant: str, seed: int, default: int) -> str:
    """The run of ``variant`` trained at ``seed``: the bare variant at the default seed, else ``variant-seedN``."""
    return variant if seed == default else f"{variant}{SEED_MARK}{seed}"


def sampling_seed(eval_seed: int, training_seed: int, default: int) -> int:
    """A run's held-out sampling seed: (eval.seed + training_seed - default) mod 2^32; the default's keeps eval.seed."""
    return (int(eval_seed) + int(training_seed) - int(default)) % 2**32


CHAIN_STRIDE = 1_000_003  # odd, so distinct chain seeds get distinct sampling seeds modulo 2^32


def chain_sampling_seed(eval_seed: int, chain_seed: int, default: int) -> int:
    """The held-out sampling seed of the chain at ``chain_seed``: (eval.seed + CHAIN_STRIDE (chain_seed - default))
    mod 2^32: chains within 4,000 of the default reuse no seed-study run's seed."""
    return (int(eval_seed) + CHAIN_STRIDE * (int(chain_seed) - int(default))) % 2**32


def with_chain_sampling_seed(member: dict, chain_seed: int, default: int) -> dict:
    """``member`` (the config at ``chain_seed``) with ``eval.seed`` set to the chain's own sampling seed."""
    eval_section = member.get("eval") or {}
    if "seed" not in eval_section:
        raise ConfigError("eval.seed is missing: the chain study derives each chain's sampling seed from it")
    seed = chain_sampling_seed(eval_section["seed"], chain_seed, default)
    return {**member, "eval": {**eval_section, "seed": seed}}


def run_eval_settings(settings: dict, model: str, variants, default: int) -> dict:
    """The eval settings a model or run samples with: a seed-study run's own ``sampling_seed``, else unchanged."""
    try:
        _, training_seed = parse_run(model, variants, default)
    except ValueError:
        return settings
    seed = sampling_seed(settings["seed"], training_seed, default)
    return settings if seed == settings["seed"] else {**settings, "seed": seed}


def parse_run(run: str, variants, default: int) -> tuple[str, int]:
    """(variant, training seed) of a run id; ValueError for a run of no known variant."""
    match = _RUN.match(run)
    if match["seed"] is not None and match["variant"] in variants:
        return match["variant"], int(match["seed"])
    if run in variants:
        return run, default
    raise ValueError(f"run {run!r} names no variant of the config (variants: {', '.join(variants)})")


def run_pattern(variants) -> str:
    """Regex of every run id of ``variants`` (a wildcard constraint): a variant, optionally ``-seedN``."""
    return "(" + "|".join(re.escape(v) for v in variants) + rf")({re.escape(SEED_MARK)}\d+)?"


def seed_variants(config: dict) -> list[str]:
    """The variants the seed study retrains: the RL rows of the method comparison (group: method), in config order."""
    return [v for v, overrides in config.get("variants", {}).items() if overrides.get("group", "method") == "method"
            and overrides.get("method", "grpo") not in OFFLINE_METHODS]


def seed_runs(config: dict) -> dict[str, list[str]]:
    """Per seed-study variant, its run ids in ``seeds.training`` order."""
    default = default_seed(config)
    return {v: [run_id(v, s, default) for s in training_seeds(config)] for v in seed_variants(config)}


LOSS_GROUP = "losses"
LOSS_BASELINE = "grpo"  # the chapter's loss: every loss variant is compared with it at the same seeds


def loss_variants(config: dict) -> list[str]:
    """The loss-family study's variants (``group: losses``), in config order."""
    return [v for v, overrides in config.get("variants", {}).items() if overrides.get("group") == LOSS_GROUP]


def loss_runs(config: dict) -> dict[str, list[str]]:
    """Per variant of the loss-family study, its run ids in ``seeds.training`` order; the baseline ``grpo`` first."""
    variants = loss_variants(config)
    if variants and LOSS_BASELINE not in config.get("variants", {}):
        raise ConfigError(f"variants.{LOSS_BASELINE} is missing: the loss-family study compares every group: losses "
                          f"variant with it; add '{LOSS_BASELINE}: {{group: method}}' under variants")
    default = default_seed(config)
    return {v: [run_id(v, s, default) for s in training_seeds(config)] for v in [LOSS_BASELINE, *variants]}


def check_seeds(config: dict) -> None:
    """Refuse variant names a run id could not tell from a seeded run, and duplicate seeds."""
    clash = [v for v in config.get("variants", {}) if _RUN.match(v)["seed"] is not None]
    if clash:
        raise ConfigError(f"variants.{clash[0]}: a name ending in '{SEED_MARK}<digits>' reads as a seeded run of "
                          f"another variant; rename it")
    seeds = training_seeds(config)
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds.training={seeds} repeats a seed: each seed trains one run; list each once")
