"""Scoring held-out samples: unbiased pass@k, Wilson and problem-level bootstrap intervals, paired tests."""

from __future__ import annotations

import numpy as np

from thai_grpo.core.rewards import CORRECT_REWARD
from thai_grpo.evaluation.intervals import (bootstrap_interval, estimate_with_interval, paired_bootstrap_test,
                                            pass_at_k_with_interval)
from thai_grpo.evaluation.passk import pass_at_k, pass_at_k_curve


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
    greedy = [int(r["greedy"]["correct"] >= CORRECT_REWARD) for r in records]
    scores["greedy_accuracy"] = _with_bootstrap(estimate_with_interval(sum(greedy), len(greedy)),
                                                greedy, n_boot, seed)
    completions = [c for r in records for c in r["completions"]]
    return {
        **scores,
        "pass_at_k_curve": pass_at_k_curve(counts, n),
        "n_samples": n,
        "num_problems": len(records),
        "per_problem_correct": counts,
        "per_problem_greedy": greedy,
        "mean_completion_length": float(np.mean([c["num_tokens"] for c in completions])),
        "truncated_ratio": float(np.mean([c["truncated"] for c in completions])),
        "mean_reward": float(np.mean([c["total"] for c in completions])),
    }


def per_problem_values(scores: dict, metric: str) -> np.ndarray:
    """A model's per-problem values of ``metric``: ``pass@1`` = its solve rate c/n, ``greedy`` = 0/1."""
    if metric == "pass@1":
        return np.asarray(scores["per_problem_correct"], dtype=float) / scores["n_samples"]
    if metric == "greedy":
        return np.asarray(scores["per_problem_greedy"], dtype=float)
    raise ValueError(f"unknown paired metric {metric!r}: use 'pass@1' or 'greedy'")


def paired_test(after: dict, before: dict, metric: str = "pass@1", n_boot: int = 10_000, seed: int = 0) -> dict:
    """Paired bootstrap over problems of ``metric`` (``per_problem_values``): after minus before, with the
    number of resamples beside the p-value (p = 0 means p < 1 / n_resamples)."""
    a, b = per_problem_values(after, metric), per_problem_values(before, metric)
    if a.shape != b.shape:
        raise ValueError("paired test needs the same held-out problems for both models")
    return {**paired_bootstrap_test(a, b, n_boot=n_boot, seed=seed), "metric": metric, "n_resamples": n_boot}


def paired_pass1_test(after: dict, before: dict, n_boot: int = 10_000, seed: int = 0) -> dict:
    """Paired bootstrap over problems of the per-problem solve rate c/n: after minus before."""
    return paired_test(after, before, "pass@1", n_boot, seed)


def holm_adjust(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment (family-wise error rate): with the m p-values sorted ascending,
    p_(i) -> max_{j <= i} min(1, (m - j + 1) p_(j)); returned in the input order. Reject where adjusted < alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def pairwise_tests(scores: dict, models: list[str], metrics=("pass@1", "greedy"), n_boot: int = 10_000,
                   seed: int = 0, alpha: float = 0.05) -> list[dict]:
    """Every pair (a, b) of ``models`` (a listed after b), per metric: the paired bootstrap of a - b, Holm-adjusted
    over the pairs of that metric (``p_holm``), and ``supported``: the difference survives the correction."""
    present = [m for m in models if m in scores]
    pairs = [(a, b) for i, b in enumerate(present) for a in present[i + 1:]]
    tests = []
    for metric in metrics:
        family = [{"a": a, "b": b, **paired_test(scores[a], scores[b], metric, n_boot, seed)} for a, b in pairs]
        for test, adjusted in zip(family, holm_adjust([t["p_value"] for t in family])):
            tests.append({**test, "p_holm": adjusted, "supported": adjusted < alpha,
                          "correction": f"Holm over {len(family)} pairs"})
    return tests
