"""Statistics of the chain study: whether a difference between methods survives a change of the whole chain (base
initialisation, data order, SFT adapter and training, all moved by one top-level seed), not only a new draw of
held-out problems.

Data: per model m (SFT and every method), a matrix X_m (chains x problems) of per-problem values (pass@1: the solve
rate c/n; greedy: 0/1), every chain scored on the same held-out problems. Chains and problems are crossed: chain c's
SFT and chain c's GRPO come from the same base and adapter, so differences are paired by chain as well as by problem.

- ``crossed_bootstrap_means``: a two-level bootstrap. Each resample draws the C chains with replacement and the P
  problems with replacement, both once for all models (the pairing by chain and by problem is kept), and the
  statistic is sum_c sum_p w_c v_p X_m[c, p] / (C P), w and v the draws' multiplicities. Resampling both factors of a
  crossed design is conservative for the problem level (McCullagh 2000); with few chains the chain level is
  anti-conservative (its variance shrinks by (C - 1) / C and there are only C(2C - 1, C) distinct chain draws), so a
  verdict also asks Student's paired t over the chains.
- ``chain_pairwise_tests``: per pair of models, the bootstrap's percentile interval and p of the difference, and the
  paired t over the per-chain differences; each Holm-adjusted over the pairs of that metric (the family).
- ``chain_verdict``: ``exceeds`` when both reject no difference after Holm, ``within`` when the bootstrap does not,
  ``unresolved`` when only the bootstrap does (the chain noise is not ruled out with this many chains).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
from scipy import stats

from thai_grpo.evaluation.scoring import holm_adjust, paired_test, per_problem_values
from thai_grpo.evaluation.seed_stats import between_seed_interval, percentile_test

VERDICTS = {
    "exceeds": "exceeds chain and problem noise",
    "within": "within the noise",
    "unresolved": "exceeds problem noise only (too few chains for the t test over chains)",
}


def crossed_bootstrap_means(matrices, n_boot: int = 10_000, seed: int = 0) -> np.ndarray:
    """Bootstrap draws (n_boot x models) of each model's mean over chains and problems, chains and problems drawn
    with replacement once per resample for every model (module docstring)."""
    matrices = [np.atleast_2d(np.asarray(m, dtype=float)) for m in matrices]
    shapes = {m.shape for m in matrices}
    if len(shapes) != 1:
        raise ValueError(f"every model needs the same chains and held-out problems, got shapes {sorted(shapes)}")
    chains, problems = shapes.pop()
    rng = np.random.default_rng(seed)
    chain_weights = rng.multinomial(chains, np.full(chains, 1 / chains), size=n_boot)
    problem_weights = rng.multinomial(problems, np.full(problems, 1 / problems), size=n_boot)
    stacked = np.stack(matrices)  # models x chains x problems
    return np.einsum("bc,mcp,bp->bm", chain_weights, stacked, problem_weights) / (chains * problems)


def chain_verdict(p_bootstrap: float, p_chains: float, alpha: float = 0.05) -> str:
    """``exceeds``: the two-level bootstrap and the paired t over chains both reject (Holm-adjusted); ``within``:
    the bootstrap does not; ``unresolved``: only the bootstrap does."""
    if p_bootstrap >= alpha:
        return "within"
    return "exceeds" if p_chains < alpha else "unresolved"


def paired_chain_t(a, b) -> float:
    """Two-sided p of Student's paired t over chains of the per-chain means a_c - b_c (1.0 when they never vary)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size < 2:
        raise ValueError("a test over chains needs at least 2 chains: list more in chains.seeds")
    differences = a - b
    if np.allclose(differences, differences[0]):
        return 0.0 if differences[0] != 0 else 1.0
    return float(stats.ttest_rel(a, b).pvalue)


def chain_pairwise_tests(matrices: dict[str, np.ndarray], draws: np.ndarray, metric: str,
                         alpha: float = 0.05) -> list[dict]:
    """Every pair (a, b) of models, a listed after b: the crossed bootstrap of mean a - b and the paired t over the
    chains' means, each Holm-adjusted over this metric's pairs, and the verdict (``chain_verdict``)."""
    names = list(matrices)
    column = {m: i for i, m in enumerate(names)}
    tests = []
    for b, a in combinations(names, 2):
        observed = float(matrices[a].mean() - matrices[b].mean())
        tests.append({"a": a, "b": b, "metric": metric,
                      **percentile_test(draws[:, column[a]] - draws[:, column[b]], observed),
                      "per_chain": [float(x) for x in matrices[a].mean(axis=1) - matrices[b].mean(axis=1)],
                      "t_p": paired_chain_t(matrices[a].mean(axis=1), matrices[b].mean(axis=1))})
    family = f"Holm over the {len(tests)} pairs of {metric}"
    for test, p_boot, p_t in zip(tests, holm_adjust([t["p_value"] for t in tests]),
                                 holm_adjust([t["t_p"] for t in tests])):
        test.update(p_holm=p_boot, t_p_holm=p_t, family=family, verdict=chain_verdict(p_boot, p_t, alpha))
    return tests


def _chain_row(seed: int, scores: dict, sft: dict, n_boot: int, boot_seed: int) -> dict:
    """One chain of one model: its pass@1, pass@8 and greedy with their intervals, and its pass@1 gain over the same
    chain's SFT with the paired problem-bootstrap interval (the problem noise alone)."""
    row = {"seed": seed}
    for key, name in (("pass@1", "pass@1"), ("pass@8", "pass@8"), ("greedy_accuracy", "greedy")):
        if key in scores:
            row[name] = {k: scores[key][k] for k in ("estimate", "bootstrap_low", "bootstrap_high") if k in scores[key]}
    if scores is not sft:
        gain = paired_test(scores, sft, "pass@1", n_boot, boot_seed)
        row["gain_over_sft"] = {"estimate": gain["mean_diff"], "low": gain["ci_low"], "high": gain["ci_high"]}
    return row


def chain_study(runs: dict[str, list[dict]], n_boot: int = 10_000, seed: int = 0, confidence: float = 0.95,
                alpha: float = 0.05, metrics=("pass@1", "greedy")) -> dict:
    """results/chains/results.json from ``runs``: per model (``sft`` first), its chains in the same order as
    {"seed", "scores"} (scores.json of the chain's model). Per model: each chain's row (``_chain_row``); for the
    methods the mean pass@1 gain over SFT with the between-chain t interval and the crossed bootstrap's; per metric,
    every pair of models (``chain_pairwise_tests``)."""
    if "sft" not in runs:
        raise ValueError("the chain study compares every method with the same chain's SFT: include sft")
    seeds = [r["seed"] for r in runs["sft"]]
    for model, model_runs in runs.items():
        if [r["seed"] for r in model_runs] != seeds:
            raise ValueError(f"{model}: chains {[r['seed'] for r in model_runs]} differ from SFT's {seeds}")
    alpha_ci = 1 - confidence
    out = {"seeds": seeds, "models": {}, "pairs": {}, "n_resamples": n_boot, "bootstrap_seed": seed,
           "confidence": confidence, "alpha": alpha}
    for metric in metrics:
        matrices = {m: np.stack([per_problem_values(r["scores"], metric) for r in rs]) for m, rs in runs.items()}
        draws = crossed_bootstrap_means(list(matrices.values()), n_boot, seed)
        out["pairs"][metric] = chain_pairwise_tests(matrices, draws, metric, alpha)
        if metric != "pass@1":
            continue
        sft_column = list(matrices).index("sft")
        for index, (model, model_runs) in enumerate(runs.items()):
            rows = [_chain_row(r["seed"], r["scores"], s["scores"] if model != "sft" else r["scores"], n_boot, seed)
                    for r, s in zip(model_runs, runs["sft"])]
            entry = {"chains": rows}
            if model != "sft":
                gains = [row["gain_over_sft"]["estimate"] for row in rows]
                low, high = np.quantile(draws[:, index] - draws[:, sft_column], [alpha_ci / 2, 1 - alpha_ci / 2])
                entry["gain_over_sft"] = {**between_seed_interval(gains, confidence),
                                          "two_level": {"low": float(low), "high": float(high)}}
            out["models"][model] = entry
    return out
