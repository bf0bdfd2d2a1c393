"""Threads and Snakemake priorities of the pipeline's jobs: the headline (SFT vs GRPO) first, the run's longest chain
next. Every job takes one thread: two one-thread jobs side by side do more per core-second than one with two, and
more cores change no number. Priorities only order the jobs; they change no number either.
"""

from __future__ import annotations

CORE_CHAIN = ("base", "sft", "grpo")
JOB_THREADS = 1  # every training, sampling and scoring job

CHAIN_TRAINING = 40  # base, SFT, GRPO's training: the headline's longest path
HEADLINE_SAMPLING = 30  # sampling base, SFT and GRPO
HEADLINE_SCORING = 10  # scoring them, and the headline itself
LONGEST_CHAIN = 5  # preference pairs -> reward model -> PPO's training: the run's critical path
OTHER_TRAINING = 1  # the other methods' runs: long, so before the short jobs that can wait
REST = 0


def training_priority(run: str, method: str) -> int:
    """Priority of the training job of run ``run`` (a variant or a seed-study run) of ``method``."""
    if run in CORE_CHAIN:
        return CHAIN_TRAINING
    return LONGEST_CHAIN if method == "ppo" else OTHER_TRAINING


def sampling_priority(model: str) -> int:
    return HEADLINE_SAMPLING if model in CORE_CHAIN else REST


def scoring_priority(model: str) -> int:
    return HEADLINE_SCORING if model in CORE_CHAIN else REST
