"""Statistics of the loss-family study: each loss variant against the chapter's ``grpo``, at the same training seeds,
on every held-out metric the scores hold (pass@k for each scored k, greedy accuracy).

Per variant and metric: the value of each seed's run, the between-seed t interval of their mean and the crossed
interval of its mean over seeds and problems (``seed_stats`` explains both). Per metric, every variant against
``grpo``: the pooled many-to-one design (``many_to_one``: seed as block, the pairing by seed kept, variance pooled
over the variants, Dunnett's simultaneous p and intervals) under the declared plan (``apply_many_to_one``): the
plan's metric (pass@1) is the confirmatory family, every other metric a secondary one.
"""

from __future__ import annotations

import numpy as np

from thai_grpo.evaluation.passk import pass_at_k
from thai_grpo.evaluation.plan import analysis_plan
from thai_grpo_studies.crossed import crossed_t_test
from thai_grpo_studies.seed_stats import (between_seed_interval, check_seed_lists, seeds_power,
                                             versus_baseline)

GREEDY = "greedy"


def metric_names(scores: dict) -> list[str]:
    """The metrics of one scores.json: ``pass@k`` for every scored k (increasing k), then ``greedy``."""
    ks = sorted(int(key[5:]) for key in scores if key.startswith("pass@") and key[5:].isdigit())
    return [f"pass@{k}" for k in ks] + ([GREEDY] if "per_problem_greedy" in scores else [])


def per_problem(scores: dict, metric: str) -> np.ndarray:
    """Per held-out problem: unbiased pass@k from its c of n correct samples, or greedy's 0/1."""
    if metric == GREEDY:
        return np.asarray(scores["per_problem_greedy"], dtype=float)
    if not metric.startswith("pass@"):
        raise ValueError(f"unknown metric {metric!r}: use 'pass@k' or '{GREEDY}'")
    n, k = scores["n_samples"], int(metric[5:])
    return np.array([pass_at_k(n, c, k) for c in scores["per_problem_correct"]], dtype=float)


def loss_study(runs: dict[str, list[dict]], baseline: str = "grpo", confidence: float = 0.95,
               plan: dict | None = None) -> dict:
    """The study's statistics from ``runs``: per variant (``baseline`` included) its runs as {"run", "seed",
    "scores"} (scores.json, same held-out problems, the same training seeds for every variant). Per metric
    (``metric_names``): per variant the per-seed values, the between-seed t interval and the crossed interval; every
    variant against ``baseline`` (``seed_stats.versus_baseline``); the seeds the confirmatory family needs."""
    plan = plan or analysis_plan(None)
    check_seed_lists(runs, baseline)
    runs = {baseline: runs[baseline], **{name: rs for name, rs in runs.items() if name != baseline}}
    metrics = metric_names(next(iter(runs.values()))[0]["scores"])
    variants = {name: {"runs": [{"run": r["run"], "seed": r["seed"]} for r in rs], "metrics": {}}
                for name, rs in runs.items()}
    versus = {}
    for metric in metrics:
        matrices = {name: np.stack([per_problem(r["scores"], metric) for r in rs]) for name, rs in runs.items()}
        for name, matrix in matrices.items():
            per_seed = matrix.mean(axis=1)
            crossed = crossed_t_test(matrix, confidence)
            variants[name]["metrics"][metric] = {"per_seed": [float(v) for v in per_seed],
                                                 "between_seed": between_seed_interval(per_seed, confidence),
                                                 "crossed": {"low": crossed["ci_low"], "high": crossed["ci_high"]}}
        versus[metric] = [{**t, "variant": t["a"], "baseline": baseline}
                          for t in versus_baseline(matrices, baseline, metric, plan, confidence)]
    confirmatory = versus.get(plan["metric"]) or []
    return {"baseline": baseline, "metrics": metrics, "variants": variants, "versus": versus,
            "families": {metric: f"{'' if metric == plan['metric'] else 'secondary: '}{tests[0]['correction']} "
                                 f"({metric}: each loss variant against {baseline})"
                         for metric, tests in versus.items() if tests},
            "power": seeds_power(confirmatory, plan), "confidence": confidence, "alpha": plan["alpha"],
            "plan": plan}
