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
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from thai_grpo.evaluation.plan import analysis_plan, apply_plan
from thai_grpo.evaluation.scoring import paired_test, per_problem_values, tost
from thai_grpo_studies.crossed import crossed_t_test
from thai_grpo_studies.power import crossed_power, family_alpha, units_needed

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
    pair of models (``chain_pair_tests``) under the plan; the power of the confirmatory metric's families
    (``chain_power``)."""
    plan = plan or analysis_plan(None)
    reference = plan["reference"]
    seeds = _check_chains(runs, reference)
    runs = {reference: runs[reference], **{m: rs for m, rs in runs.items() if m != reference}}  # pairs read m - sft
    out = {"seeds": seeds, "models": {}, "pairs": {}, "n_resamples": n_boot, "bootstrap_seed": seed,
           "confidence": confidence, "alpha": plan["alpha"], "plan": plan}
    tests = []
    for metric in metrics:
        matrices = {m: np.stack([per_problem_values(r["scores"], metric) for r in rs]) for m, rs in runs.items()}
        tests += chain_pair_tests(matrices, metric, plan["equivalence_margin"], confidence)
    tests = apply_plan(tests, plan)
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
