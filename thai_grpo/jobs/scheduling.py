"""Threads and Snakemake priorities of the pipeline's jobs: the headline (SFT vs GRPO) first, the run's longest chain
next, on any number of cores.

Every training and sampling job takes one thread (``JOB_THREADS``). A second thread makes one job of the 1.1M-parameter
model only 1.3x (sampling) to 1.6x (a GRPO step) faster (`make bench`), so two one-thread jobs side by side get more
done per core-second than one two-thread job; and a job's threads never depend on the cores, so more cores run more
jobs side by side and change no number. (Pretraining the base and the SFT adapter from scratch, outside the default
run, keeps 2 threads: rules/model.smk.)

Snakemake starts, among the jobs whose inputs are ready, the set that fits the free cores with the largest sum of
priorities (its ILP scheduler). With every job on one thread, a free core goes to the highest-priority ready job.
The headline's jobs outrank every other job: GRPO's training (the headline's longest path), then the sampling of
base, SFT and GRPO, then their scoring and the headline itself. Since each headline job that ends releases at most
one more headline job, a headline job never waits behind another method's job. Next come the preference pairs, the
reward model and PPO's training (``LONGEST_CHAIN``): PPO is the run's longest job and waits for the other two, so
starting that chain as soon as a core is free of headline work shortens the whole run. Then the other methods'
training, then the rest. Priorities only order the jobs; they change no number.
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
