"""Threads and Snakemake priorities of the pipeline's jobs: the headline (SFT vs GRPO) first, on any number of cores.

The core chain (base -> SFT -> GRPO, and the sampling of base, SFT and GRPO) trains and samples with 2 threads,
which makes each job faster (`make bench` on an AMD EPYC: a GRPO step 1.6x, held-out sampling 1.3x); every other
training and sampling job takes 1 thread and runs beside another, which gets more done per core. A job's threads never depend on the cores (Snakemake lowers them only on 1 core), so
more cores run more jobs side by side and change no number.

Snakemake starts, among the jobs whose inputs are ready, the set that fits the free cores with the largest sum of
priorities (its ILP scheduler; the greedy fallback takes the highest first). It reserves no cores: once a 1-thread
job holds one of two free cores, a 2-thread job waits until that job ends, and further 1-thread jobs keep taking the
core it frees. So each 2-thread headline job outranks any two 1-thread jobs (a headline score and another job, or two
scores): ``HEADLINE_TWO_THREADS > 2 * HEADLINE_ONE_THREAD``, and the headline's 1-thread jobs outrank the rest.
Priorities only order the jobs; they change no number.
"""

from __future__ import annotations

CORE_CHAIN = ("base", "sft", "grpo")

CHAIN_TRAINING = 40  # base, SFT, GRPO's training: the headline's longest path
HEADLINE_TWO_THREADS = 30  # sampling base, SFT and GRPO
HEADLINE_ONE_THREAD = 10  # scoring them, and the headline itself
UNBLOCKING = 2  # preference pairs and PPO's reward model: DPO and PPO (the longest job) wait for them
OTHER_TRAINING = 1  # the other methods' runs: long, so before the short jobs that can wait
REST = 0


def threads_for(name: str) -> int:
    """Threads of the training or sampling job of model or run ``name``: 2 for the core chain, else 1."""
    return 2 if name in CORE_CHAIN else 1


def training_priority(run: str) -> int:
    return CHAIN_TRAINING if run in CORE_CHAIN else OTHER_TRAINING


def sampling_priority(model: str) -> int:
    return HEADLINE_TWO_THREADS if model in CORE_CHAIN else REST


def scoring_priority(model: str) -> int:
    return HEADLINE_ONE_THREAD if model in CORE_CHAIN else REST
