"""Run ids of training seeds (``grpo``, ``grpo-seed1``) and each run's and chain's own held-out sampling seed: with a
shared one, similar models would draw mostly the same completions and the spread over seeds would miss most of the
evaluation noise."""

from __future__ import annotations

import re

SEED_MARK = "-seed"
SEEDED_RUN = re.compile(rf"^(?P<variant>.+?)(?:{SEED_MARK}(?P<seed>\d+))?$")
CHAIN_STRIDE = 1_000_003  # odd, so distinct chain seeds get distinct sampling seeds modulo 2^32


def run_id(variant: str, seed: int, default: int) -> str:
    """The run of ``variant`` trained at ``seed``: the bare variant at the default seed, else ``variant-seedN``."""
    return variant if seed == default else f"{variant}{SEED_MARK}{seed}"


def parse_run(run: str, variants, default: int) -> tuple[str, int]:
    """(variant, training seed) of a run id; ValueError for a run of no known variant."""
    match = SEEDED_RUN.match(run)
    if match["seed"] is not None and match["variant"] in variants:
        return match["variant"], int(match["seed"])
    if run in variants:
        return run, default
    raise ValueError(f"run {run!r} names no variant of the config (variants: {', '.join(variants)})")


def run_pattern(variants) -> str:
    """Regex of every run id of ``variants`` (a wildcard constraint): a variant, optionally ``-seedN``."""
    return "(" + "|".join(re.escape(v) for v in variants) + rf")({re.escape(SEED_MARK)}\d+)?"


def sampling_seed(eval_seed: int, training_seed: int, default: int) -> int:
    """A run's held-out sampling seed: (eval.seed + training_seed - default) mod 2^32; the default's keeps eval.seed."""
    return (int(eval_seed) + int(training_seed) - int(default)) % 2**32


def chain_sampling_seed(eval_seed: int, chain_seed: int, default: int) -> int:
    """The held-out sampling seed of the chain at ``chain_seed``: (eval.seed + CHAIN_STRIDE (chain_seed - default))
    mod 2^32: chains within 4,000 of the default reuse no seed-study run's seed."""
    return (int(eval_seed) + CHAIN_STRIDE * (int(chain_seed) - int(default))) % 2**32
