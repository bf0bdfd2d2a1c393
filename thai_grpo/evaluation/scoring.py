"""Scoring held-out samples: pass@k with its intervals, and paired tests under the declared analysis plan."""

from __future__ import annotations

import numpy as np
from scipy import stats

from thai_grpo.core.rewards import CORRECT_REWARD
from thai_grpo.evaluation.intervals import (bootstrap_interval, estimate_with_interval, paired_bootstrap_test,
                                            pass_at_k_with_interval)
from thai_grpo.evaluation.passk import pass_at_k, pass_at_k_curve
from thai_grpo.evaluation.plan import analysis_plan, apply_plan, holm_adjust  # noqa: F401 (holm_adjust: re-exported)


def correct_counts(records: list[dict]) -> list[int]:
    """Per problem, how many of its n sampled completions are correct (c of pass@k)."""
    return [sum(c["correct"] >= CORRECT_REWARD for c in r["completions"]) for r in records]


def _with_bootstrap(interval: dict, per_problem: list[float], n_boot: int, seed: int) -> dict:
    low, high = bootstrap_interval(per_problem, n_boot=n_boot, seed=seed)
    return {**interval, "bootstrap_low": float(low), "bootstrap_high": float(high)}


def score_model(records: list[dict], ks: list[int], n_boot: int = 10_000, seed: int = 0) -> dict:
    """pass@k for each k (Wilson and bootstrap 95% intervals), greedy accuracy, the pass@k curve, lengths."""
    n = len(records[0]["completions"])  # the same for every problem: the sampler draws n each
    counts = correct_counts(records)
    scores = {}
    for k in ks:
        per_problem = [pass_at_k(n, c, k) for c in counts]
        scores[f"pass@{k}"] = _with_bootstrap(pass_at_k_with_interval(counts, n, k), per_problem, n_boot, seed)
    greedy = [int(r["greedy"]["correct"] >= CORRECT_REWARD) for r in records]
    scores["greedy_accuracy"] = _with_bootstrap(estimate_with_interval(sum(greedy), len(greedy)),
                                                greedy, n_boot, seed)
    completions = [c for r in records for c in r["completions"]]
    return {**scores, "pass_at_k_curve": pass_at_k_curve(counts, n), "n_samples": n, "num_problems": len(records),
            "per_problem_correct": counts, "per_problem_greedy": greedy,
            "mean_completion_length": float(np.mean([c["num_tokens"] for c in completions])),
            "truncated_ratio": float(np.mean([c["truncated"] for c in completions])),
            "mean_reward": float(np.mean([c["total"] for c in completions]))}


def per_problem_values(scores: dict, metric: str) -> np.ndarray:
    """A model's per-problem values of ``metric``: ``pass@1`` = its solve rate c/n, ``greedy`` = 0/1."""
    if metric == "pass@1":
        return np.asarray(scores["per_problem_correct"], dtype=float) / scores["n_samples"]
    if metric == "greedy":
        return np.asarray(scores["per_problem_greedy"], dtype=float)
    raise ValueError(f"unknown paired metric {metric!r}: use 'pass@1' or 'greedy'")


def paired_test(after: dict, before: dict, metric: str = "pass@1", n_boot: int = 10_000, seed: int = 0) -> dict:
    """Paired bootstrap over problems of ``metric`` (``per_problem_values``), after minus before."""
    a, b = per_problem_values(after, metric), per_problem_values(before, metric)
    return {**paired_bootstrap_test(a, b, n_boot=n_boot, seed=seed), "metric": metric, "n_resamples": n_boot}


def problem_tost(after: dict, before: dict, metric: str, margin: float) -> float:
    """TOST p of equivalence within +- ``margin`` of the per-problem differences after minus before (Student's t)."""
    d = per_problem_values(after, metric) - per_problem_values(before, metric)
    return tost(float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size)), d.size - 1, margin)


def pairwise_tests(scores: dict, models: list[str], metrics=("pass@1", "greedy"), n_boot: int = 10_000,
                   seed: int = 0, plan: dict | None = None) -> list[dict]:
    """Every pair (a, b) of ``models`` per metric: the paired bootstrap of a - b and its TOST p within the plan's
    margin, with ``plan.apply_plan`` applied."""
    plan = plan or analysis_plan(None)
    present = [m for m in models if m in scores]
    pairs = [(a, b) for i, b in enumerate(present) for a in present[i + 1:]]
    tests = [{"a": a, "b": b, **paired_test(scores[a], scores[b], metric, n_boot, seed),
              "tost_p": problem_tost(scores[a], scores[b], metric, plan["equivalence_margin"]),
              "margin": plan["equivalence_margin"], "scope": "problems"}
             for metric in metrics for a, b in pairs]
    return apply_plan(tests, plan)


def tost(estimate: float, se: float, df: float, margin: float) -> float:
    """Schuirmann's two one-sided tests of equivalence within +- margin, T ~ t(df): p = max(P(T >= (estimate + margin)
    / se), P(T <= (estimate - margin) / se)); se 0 gives p = 1, as no sample gives the limit's certainty."""
    if margin <= 0:
        raise ValueError(f"an equivalence margin must be positive, got {margin}: set analysis.equivalence_margin")
    if se <= 0:
        return 1.0
    lower = stats.t.sf((estimate + margin) / se, df)
    upper = stats.t.cdf((estimate - margin) / se, df)
    return float(max(lower, upper))
