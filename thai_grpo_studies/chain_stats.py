"""Statistics of the chain study: whether a difference between methods survives a change of the whole chain (base
initialisation, data order, SFT adapter and training, all moved by one top-level seed), not only a new draw of
held-out problems.

Data: per model m (SFT and every method), a matrix X_m (chains x problems) of per-problem values (pass@1: the solve
rate c/n; greedy: 0/1), every chain scored on the same held-out problems, each chain with its own sampling seed
(``core.seeds.chain_sampling_seed``). Chains and problems are crossed: chain c's SFT and chain c's GRPO come from the
same base and adapter, so differences are paired by chain as well as by problem.

- ``chain_pair_tests``: per pair of models, the crossed random-effects analysis of the chains x problems matrix of
  paired differences (``crossed.crossed_t_test``: chain, problem and residual variance in one standard error,
  Satterthwaite's degrees of freedom) and its TOST p of equivalence; the declared plan (``plan.apply_plan``) then
  gives each pair its family, correction and verdict.
- ``chain_power``: per pair of the confirmatory metric, how many chains its family needs to detect the plan's stated
  effect at the plan's target power (``power.units_needed``), from its measured components.
- Within one chain, the paired bootstrap over problems (``_chain_row``) is valid for that chain's problem noise only;
  it is shown per chain and never used for a verdict across chains.
- ``previous_rule``: the rule these verdicts replaced, kept beside them for comparison: a two-level bootstrap over
  chains and problems (``crossed_bootstrap_means``) and Student's paired t over the chains' means
  (``paired_chain_t``), both Holm-adjusted over every pair of a metric, ``exceeds`` only when both reject. Each half
  is invalid alone with few chains: the bootstrap shrinks the chain variance by (C - 1) / C and has only
  C(2C - 1, C) distinct chain draws; the t over chains treats the shared problems as fixed.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
from scipy import stats

from thai_grpo.evaluation.plan import analysis_plan, apply_plan, holm_adjust
from thai_grpo.evaluation.scoring import paired_test, per_problem_values, tost
from thai_grpo_studies.crossed import CONSTANT_ATOL, crossed_t_test
from thai_grpo_studies.power import crossed_power, family_alpha, units_needed
from thai_grpo_studies.seed_stats import percentile_test

#: The superseded rule's verdict words (``previous_rule``), kept for the comparison with the plan's verdicts.
PREVIOUS_VERDICTS = {
    "exceeds": "exceeds chain and problem noise",
    "within": "within the noise",
    "unresolved": "exceeds problem noise only (too few chains for the t test over chains)",
}
PREVIOUS_RULE = ("two-level bootstrap over chains and problems and Student's paired t over the chains' means, both "
                 "Holm-adjusted over every pair of the metric; exceeds when both reject, within when the bootstrap "
                 "does not, unresolved when only the bootstrap does")


def crossed_bootstrap_means(matrices, n_boot: int = 10_000, seed: int = 0) -> np.ndarray:
    """Bootstrap draws (n_boot x models) of each model's mean over chains and problems, chains and problems drawn
    with replacement once per resample for every model (the superseded rule's bootstrap, module docstring)."""
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
    """The superseded rule: ``exceeds`` when the two-level bootstrap and the paired t over chains both reject
    (Holm-adjusted); ``within`` when the bootstrap does not; ``unresolved`` when only the bootstrap does."""
    if p_bootstrap >= alpha:
        return "within"
    return "exceeds" if p_chains < alpha else "unresolved"


def paired_chain_t(a, b) -> float:
    """Two-sided p of Student's paired t over chains of the per-chain means a_c - b_c. Differences that do not vary
    (all within ``crossed.CONSTANT_ATOL`` of their mean) have no t: p = 1 when that mean is 0 within the same
    tolerance, else 0 (the limit t -> inf)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size < 2:
        raise ValueError("a test over chains needs at least 2 chains: list more in chains.seeds")
    differences = a - b
    mean = float(differences.mean())
    if np.all(np.abs(differences - mean) <= CONSTANT_ATOL):
        return 1.0 if abs(mean) <= CONSTANT_ATOL else 0.0
    return float(stats.ttest_rel(a, b).pvalue)


def previous_rule(matrices: dict[str, np.ndarray], draws: np.ndarray, metric: str, alpha: float = 0.05) -> list[dict]:
    """The superseded rule on every pair (a, b) of models, a listed after b (module docstring): the crossed bootstrap
    of mean a - b and the paired t over the chains' means, each Holm-adjusted over this metric's pairs, and its
    verdict (``chain_verdict``)."""
    names = list(matrices)
    column = {m: i for i, m in enumerate(names)}
    tests = []
    for b, a in combinations(names, 2):
        observed = float(matrices[a].mean() - matrices[b].mean())
        tests.append({"a": a, "b": b, "metric": metric,
                      **percentile_test(draws[:, column[a]] - draws[:, column[b]], observed),
                      "t_p": paired_chain_t(matrices[a].mean(axis=1), matrices[b].mean(axis=1))})
    family = f"Holm over the {len(tests)} pairs of {metric}"
    for test, p_boot, p_t in zip(tests, holm_adjust([t["p_value"] for t in tests]),
                                 holm_adjust([t["t_p"] for t in tests])):
        test.update(p_holm=p_boot, t_p_holm=p_t, family=family, verdict=chain_verdict(p_boot, p_t, alpha))
    return tests


def chain_pair_tests(matrices: dict[str, np.ndarray], metric: str, margin: float,
                     confidence: float = 0.95) -> list[dict]:
    """Every pair (a, b) of models, a listed after b: the crossed analysis of the chains x problems matrix of
    a - b (``crossed.crossed_t_test``), its TOST p within +- ``margin`` and the per-chain mean differences."""
    tests = []
    for b, a in combinations(list(matrices), 2):
        differences = matrices[a] - matrices[b]
        crossed = crossed_t_test(differences, confidence)
        tests.append({"a": a, "b": b, "metric": metric, **crossed,
                      "tost_p": tost(crossed["mean_diff"], crossed["se"], crossed["df"], margin), "margin": margin,
                      "per_chain": [float(x) for x in differences.mean(axis=1)], "scope": "chains and problems"})
    return tests


def chain_power(tests: list[dict], plan: dict) -> dict:
    """Per tested pair of the confirmatory metric (a family of the plan): its family's stated effect and level
    (``power.family_alpha``), the power of the crossed test at the current number of chains and the chains needed
    for the plan's target power, from the pair's measured components; per family the most any of its pairs
    needs (None: more chains alone cannot reach it)."""
    target, effects = plan["power"]["target"], plan["power"]["effects"]
    pairs, families = [], {}
    for t in tests:
        if t["family"] not in effects:
            continue
        alpha = family_alpha(t["family"], t["family_size"], plan["alpha"])
        effect = effects[t["family"]]
        needed = units_needed(t["components"], t["problems"], effect, alpha, target)
        pairs.append({"a": t["a"], "b": t["b"], "family": t["family"], "effect": effect, "alpha": alpha,
                      "power_now": crossed_power(t["components"], t["chains"], t["problems"], effect, alpha),
                      "chains_needed": needed})
        entry = families.setdefault(t["family"], {"effect": effect, "alpha": alpha, "chains_needed": 0})
        entry["chains_needed"] = None if needed is None or entry["chains_needed"] is None else \
            max(entry["chains_needed"], needed)
    return {"target": target, "chains": tests[0]["chains"] if tests else None, "pairs": pairs, "families": families}


def _chain_row(seed: int, scores: dict, sft: dict, n_boot: int, boot_seed: int) -> dict:
    """One chain of one model: its pass@1, pass@8 and greedy with their intervals, and its pass@1 gain over the same
    chain's SFT with the paired problem-bootstrap interval (this chain's problem noise alone: valid within the
    chain, not across chains)."""
    row = {"seed": seed}
    for key, name in (("pass@1", "pass@1"), ("pass@8", "pass@8"), ("greedy_accuracy", "greedy")):
        if key in scores:
            row[name] = {k: scores[key][k] for k in ("estimate", "bootstrap_low", "bootstrap_high") if k in scores[key]}
    if scores is not sft:
        gain = paired_test(scores, sft, "pass@1", n_boot, boot_seed)
        row["gain_over_sft"] = {"estimate": gain["mean_diff"], "low": gain["ci_low"], "high": gain["ci_high"]}
    return row


def _check_chains(runs: dict[str, list[dict]], reference: str) -> list:
    if reference not in runs:
        raise ValueError(f"the chain study compares every method with the same chain's {reference}: include it")
    seeds = [r["seed"] for r in runs[reference]]
    for model, model_runs in runs.items():
        if [r["seed"] for r in model_runs] != seeds:
            raise ValueError(f"{model}: chains {[r['seed'] for r in model_runs]} differ from {reference}'s {seeds}")
    if len(seeds) < 2:
        raise ValueError(f"a chain study needs at least 2 chains, got {len(seeds)}: list more in chains.seeds")
    return seeds


def chain_study(runs: dict[str, list[dict]], n_boot: int = 10_000, seed: int = 0, confidence: float = 0.95,
                plan: dict | None = None, metrics=("pass@1", "greedy")) -> dict:
    """results/chains/results.json from ``runs``: per model (``sft`` first), its chains in the same order as
    {"seed", "scores"} (scores.json of the chain's model). Per model: each chain's row (``_chain_row``); for the
    methods the gain over SFT across chains (the crossed analysis of its pass@1 pair with SFT). Per metric, every
    pair of models (``chain_pair_tests``) under the plan, each with the superseded rule's verdict beside it
    (``previous``); the power of the confirmatory metric's families (``chain_power``)."""
    plan = plan or analysis_plan(None)
    reference = plan["reference"]
    seeds = _check_chains(runs, reference)
    runs = {reference: runs[reference], **{m: rs for m, rs in runs.items() if m != reference}}  # pairs read m - sft
    out = {"seeds": seeds, "models": {}, "pairs": {}, "n_resamples": n_boot, "bootstrap_seed": seed,
           "confidence": confidence, "alpha": plan["alpha"], "plan": plan, "previous_rule": PREVIOUS_RULE}
    tests, previous = [], {}
    for metric in metrics:
        matrices = {m: np.stack([per_problem_values(r["scores"], metric) for r in rs]) for m, rs in runs.items()}
        tests += chain_pair_tests(matrices, metric, plan["equivalence_margin"], confidence)
        draws = crossed_bootstrap_means(list(matrices.values()), n_boot, seed)
        previous.update({(t["a"], t["b"], metric): t for t in previous_rule(matrices, draws, metric, plan["alpha"])})
    tests = apply_plan(tests, plan)
    for t in tests:
        old = previous[(t["a"], t["b"], t["metric"])]
        t["previous"] = {key: old[key] for key in ("ci_low", "ci_high", "p_holm", "t_p_holm", "family", "verdict",
                                                   "p_at_floor", "n_resamples")}
    for metric in metrics:
        out["pairs"][metric] = [t for t in tests if t["metric"] == metric]
    out["power"] = chain_power(out["pairs"].get(plan["metric"], []), plan)
    versus = {t["a"]: t for t in out["pairs"].get("pass@1", []) if t["b"] == reference}
    for model, model_runs in runs.items():
        rows = [_chain_row(r["seed"], r["scores"], s["scores"] if model != reference else r["scores"], n_boot, seed)
                for r, s in zip(model_runs, runs[reference])]
        entry = {"chains": rows}
        if model in versus:
            t = versus[model]
            entry["gain_over_sft"] = {"mean": t["mean_diff"], "low": t["ci_low"], "high": t["ci_high"],
                                      "se": t["se"], "df": t["df"], "chains": len(rows), "confidence": confidence}
        out["models"][model] = entry
    return out
