"""Statistics of the loss-family study: each loss variant against the chapter's ``grpo``, at the same training seeds,
on every held-out metric the scores hold (pass@k for each scored k, greedy accuracy).

Per variant and metric: the value of each seed's run, the between-seed t interval of their mean and the two-level
bootstrap interval (problems drawn once per resample for every variant, each variant's seeds drawn as whole runs;
``seed_stats`` explains both). Per variant and metric, the difference from ``grpo`` (mean over seeds of the mean over
problems) with its two-level bootstrap interval and p, and Welch's t over the per-seed values. The family of a metric
is its variant-vs-grpo pairs only (not every pair of variants), Holm-adjusted; the verdict (``seed_verdict``) says
``exceeds`` only when both tests reject no difference: the gap is larger than what retraining at another seed moves.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from thai_grpo.evaluation.passk import pass_at_k
from thai_grpo.evaluation.scoring import holm_adjust
from thai_grpo.evaluation.seed_stats import between_seed_interval, percentile_test, seed_verdict, two_level_means

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


def versus_baseline(matrices: dict[str, np.ndarray], draws: np.ndarray, baseline: str, metric: str,
                    alpha: float = 0.05) -> list[dict]:
    """Every variant of ``matrices`` (seeds x problems) but ``baseline`` against it: variant - baseline with the
    two-level bootstrap (``draws``: ``two_level_means`` in ``matrices`` order) and Welch's t over the per-seed values,
    both Holm-adjusted over these pairs only, and the verdict."""
    names = list(matrices)
    column = {name: index for index, name in enumerate(names)}
    others = [name for name in names if name != baseline]
    tests = []
    for name in others:
        observed = float(matrices[name].mean() - matrices[baseline].mean())
        welch = stats.ttest_ind(matrices[name].mean(axis=1), matrices[baseline].mean(axis=1), equal_var=False)
        tests.append({"variant": name, "baseline": baseline, "metric": metric,
                      **percentile_test(draws[:, column[name]] - draws[:, column[baseline]], observed),
                      "welch_p": float(welch.pvalue) if np.isfinite(welch.pvalue) else 1.0})
    family = f"Holm over {len(tests)} pairs ({metric}: each loss variant against {baseline})"
    for test, p_boot, p_welch in zip(tests, holm_adjust([t["p_value"] for t in tests]),
                                     holm_adjust([t["welch_p"] for t in tests])):
        test.update(p_holm=p_boot, welch_p_holm=p_welch, correction=family,
                    verdict=seed_verdict(p_boot, p_welch, alpha))
    return tests


def _check_runs(runs: dict[str, list[dict]], baseline: str) -> None:
    if baseline not in runs:
        raise ValueError(f"the loss-family study needs the {baseline!r} runs to compare with; got {sorted(runs)}")
    counts = {name: len(rs) for name, rs in runs.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(f"every variant needs a run at each training seed; runs per variant: {counts}")


def loss_study(runs: dict[str, list[dict]], baseline: str = "grpo", n_boot: int = 10_000, seed: int = 0,
               confidence: float = 0.95, alpha: float = 0.05) -> dict:
    """The study's statistics from ``runs``: per variant (``baseline`` included) its runs as {"run", "seed",
    "scores"} (scores.json, same held-out problems). Per metric (``metric_names``): per variant the per-seed values,
    the between-seed t interval and the two-level bootstrap interval; every variant against ``baseline``
    (``versus_baseline``)."""
    _check_runs(runs, baseline)
    metrics = metric_names(next(iter(runs.values()))[0]["scores"])
    tail = (1 - confidence) / 2
    variants = {name: {"runs": [{"run": r["run"], "seed": r["seed"]} for r in rs], "metrics": {}}
                for name, rs in runs.items()}
    versus = {}
    for metric in metrics:
        matrices = {name: np.stack([per_problem(r["scores"], metric) for r in rs]) for name, rs in runs.items()}
        draws = two_level_means(list(matrices.values()), n_boot, seed)
        for index, (name, matrix) in enumerate(matrices.items()):
            per_seed = matrix.mean(axis=1)
            low, high = np.quantile(draws[:, index], [tail, 1 - tail])
            variants[name]["metrics"][metric] = {"per_seed": [float(v) for v in per_seed],
                                                 "between_seed": between_seed_interval(per_seed, confidence),
                                                 "two_level": {"low": float(low), "high": float(high)}}
        versus[metric] = versus_baseline(matrices, draws, baseline, metric, alpha)
    return {"baseline": baseline, "metrics": metrics, "variants": variants, "versus": versus,
            "families": {metric: tests[0]["correction"] for metric, tests in versus.items() if tests},
            "n_resamples": n_boot, "bootstrap_seed": seed, "confidence": confidence, "alpha": alpha}
