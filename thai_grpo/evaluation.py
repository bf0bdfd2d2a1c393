"""Scoring held-out samples: unbiased pass@k, Wilson and problem-level bootstrap intervals, paired tests."""

from __future__ import annotations

import numpy as np

from thai_grpo.intervals import (bootstrap_interval, estimate_with_interval, paired_bootstrap_test,
                                 pass_at_k_with_interval)
from thai_grpo.passk import pass_at_k, pass_at_k_curve
from thai_grpo.rewards import CORRECT_REWARD


def correct_counts(records: list[dict]) -> list[int]:
    """Per problem, how many of its n sampled completions are correct (c of pass@k)."""
    return [sum(c["correct"] >= CORRECT_REWARD for c in r["completions"]) for r in records]


def samples_per_problem(records: list[dict]) -> int:
    sizes = {len(r["completions"]) for r in records}
    if len(sizes) != 1:
        raise ValueError(f"problems have different sample counts {sorted(sizes)}: resample the model")
    return sizes.pop()


def _with_bootstrap(interval: dict, per_problem: list[float], n_boot: int, seed: int) -> dict:
    low, high = bootstrap_interval(per_problem, n_boot=n_boot, seed=seed)
    return {**interval, "bootstrap_low": float(low), "bootstrap_high": float(high)}


def score_model(records: list[dict], ks: list[int], n_boot: int = 10_000, seed: int = 0) -> dict:
    """pass@k for each k (Wilson and bootstrap 95% intervals), greedy accuracy, the pass@k curve, lengths."""
    n = samples_per_problem(records)
    counts = correct_counts(records)
    scores = {}
    for k in ks:
        per_problem = [pass_at_k(n, c, k) for c in counts]
        scores[f"pass@{k}"] = _with_bootstrap(pass_at_k_with_interval(counts, n, k), per_problem, n_boot, seed)
    greedy = [float(r["greedy"]["correct"] >= CORRECT_REWARD) for r in records]
    scores["greedy_accuracy"] = _with_bootstrap(estimate_with_interval(int(sum(greedy)), len(greedy)),
                                                greedy, n_boot, seed)
    completions = [c for r in records for c in r["completions"]]
    return {
        **scores,
        "pass_at_k_curve": pass_at_k_curve(counts, n),
        "n_samples": n,
        "num_problems": len(records),
        "per_problem_correct": counts,
        "mean_completion_length": float(np.mean([c["num_tokens"] for c in completions])),
        "truncated_ratio": float(np.mean([c["truncated"] for c in completions])),
        "mean_reward": float(np.mean([c["total"] for c in completions])),
    }


def paired_pass1_test(after: dict, before: dict, n_boot: int = 10_000, seed: int = 0) -> dict:
    """Paired bootstrap over problems of the per-problem solve rate c/n: after minus before."""
    a = np.asarray(after["per_problem_correct"]) / after["n_samples"]
    b = np.asarray(before["per_problem_correct"]) / before["n_samples"]
    if a.shape != b.shape:
        raise ValueError("paired test needs the same held-out problems for both models")
    return paired_bootstrap_test(a, b, n_boot=n_boot, seed=seed)
