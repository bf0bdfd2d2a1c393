"""Training-seed runs: which runs the seed study (``snakemake seeds``) trains, and how a run id names one.

A run id is a variant plus an optional training seed: ``grpo`` is the variant trained at the config's ``seed``
(the run ``snakemake`` already builds), ``grpo-seed1`` the same variant trained at seed 1 (``seed`` of
transformers.set_seed and of TRL's data order: rollouts, dropout, prompt order). Data, base and SFT adapter are the
same for every run. Each run samples the held-out set with its own sampling seed (``sampling_seed``): runs sampled
with one seed share their random numbers, so two similar models would draw mostly the same completions and the
seed-to-seed spread would leave out most of the evaluation noise. The train, sample and score rules take run ids as
their wildcard: no rule is copied per seed.
"""

from __future__ import annotations

import re

from thai_grpo.core.config import ConfigError

SEED_MARK = "-seed"
# Methods trained on fixed data with no rollouts of their own: the seed study retrains only the RL methods
# (every other method samples its own completions, so its training seed moves its rollouts).
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
    """The held-out sampling seed of a run trained at ``training_seed``: (eval.seed + training_seed - default) mod
    2^32. The default seed's run keeps eval.seed (the main results are unchanged); distinct training seeds get
    distinct sampling seeds (numpy's seeds are 0 .. 2^32 - 1)."""
    return (int(eval_seed) + int(training_seed) - int(default)) % 2**32


CHAIN_STRIDE = 1_000_003  # odd, so distinct chain seeds get distinct sampling seeds modulo 2^32


def chain_sampling_seed(eval_seed: int, chain_seed: int, default: int) -> int:
    """The held-out sampling seed of the chain at top-level ``chain_seed``: (eval.seed + 1,000,003 (chain_seed -
    default)) mod 2^32. The config's own chain keeps eval.seed (the main run's numbers do not change); every other
    chain gets its own (the stride is odd, so the map is one-to-one modulo 2^32), and for chain seeds within 4,000 of
    the default none equals a seed-study run's (eval.seed + training seed - default, ``sampling_seed``) for a training
    seed within a million of the default."""
    return (int(eval_seed) + CHAIN_STRIDE * (int(chain_seed) - int(default))) % 2**32


def with_chain_sampling_seed(member: dict, chain_seed: int, default: int) -> dict:
    """A chain module's config (``member``: the config at ``chain_seed``) with ``eval.seed`` set to the chain's own
    sampling seed (``chain_sampling_seed``): with one shared seed every chain would draw its held-out completions from
    the same random numbers, and the spread over chains would leave out most of the evaluation noise."""
    eval_section = member.get("eval") or {}
    if "seed" not in eval_section:
        raise ConfigError("eval.seed is missing: the chain study derives each chain's sampling seed from it")
    seed = chain_sampling_seed(eval_section["seed"], chain_seed, default)
    return {**member, "eval": {**eval_section, "seed": seed}}


def run_eval_settings(settings: dict, model: str, variants, default: int) -> dict:
    """The eval settings (``config.eval_settings``) a model or run samples with: ``seed`` from ``sampling_seed``
    for a seed-study run (``grpo-seed1``), the settings themselves for every other model (base, sft, variants)."""
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


def is_rl(config: dict, variant: str) -> bool:
    return config["variants"][variant].get("method", "grpo") not in OFFLINE_METHODS


def seed_variants(config: dict) -> list[str]:
    """The variants the seed study retrains: every row of the method comparison (group: method) that is an RL
    method, in config order; a method added later (PPO) joins without a change here."""
    return [v for v, overrides in config.get("variants", {}).items()
            if overrides.get("group", "method") == "method" and is_rl(config, v)]


def seed_runs(config: dict) -> dict[str, list[str]]:
    """Per seed-study variant, its run ids in ``seeds.training`` order (the default seed's run is the existing one)."""
    default = default_seed(config)
    return {v: [run_id(v, s, default) for s in training_seeds(config)] for v in seed_variants(config)}


LOSS_GROUP = "losses"
LOSS_BASELINE = "grpo"  # the chapter's loss: every loss variant is compared with it at the same seeds


def loss_variants(config: dict) -> list[str]:
    """The loss-family study's variants (``group: losses``), in config order."""
    return [v for v, overrides in config.get("variants", {}).items() if overrides.get("group") == LOSS_GROUP]


def loss_runs(config: dict) -> dict[str, list[str]]:
    """Per variant of the loss-family study, its run ids in ``seeds.training`` order: ``grpo`` first (the
    comparison's baseline, the same runs as the seed study's), then every ``group: losses`` variant."""
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
