"""The declared analysis plan (config ``analysis:``, fixed before any result) and the verdict each paired test gets."""

from __future__ import annotations

import copy


DEFAULT_PLAN = {"alpha": 0.05, "metric": "pass@1", "primary": ["grpo", "sft"], "reference": "sft",
                "families": ["vs_sft", "methods"], "equivalence_margin": 0.05,
                "power": {"target": 0.8, "effects": {"primary": 0.10, "vs_sft": 0.10, "methods": 0.10}}}
SECONDARY = "secondary"
VERDICTS = ("higher", "lower", "equivalent", "not_resolved", "not_tested")


def analysis_plan(config: dict | None) -> dict:
    """The config's ``analysis`` section (families checked by the schema) over ``DEFAULT_PLAN``; ValueError for a
    primary pair that is not two different models."""
    given = (config or {}).get("analysis") or {}
    plan = copy.deepcopy(DEFAULT_PLAN)
    for key, value in given.items():
        plan[key] = {**plan[key], **value} if isinstance(plan.get(key), dict) else value
    plan["power"]["effects"] = {**DEFAULT_PLAN["power"]["effects"], **plan["power"].get("effects", {})}
    if len(set(plan["primary"])) != 2:
        raise ValueError(f"analysis.primary must name two different models [a, b], got {plan['primary']}")
    return plan


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


def family_of(a: str, b: str, metric: str, plan: dict) -> str:
    """The family of the test of a - b on ``metric``: primary, vs_sft, methods or secondary."""
    if metric != plan["metric"]:
        return SECONDARY
    if {a, b} == set(plan["primary"]):
        return "primary"
    family = "vs_sft" if plan["reference"] in (a, b) else "methods"
    return family if family in plan["families"] else SECONDARY


def decide(mean_diff: float, p_adjusted: float, tost_adjusted: float | None, tested: bool, alpha: float) -> str:
    """``not_tested`` (gate closed), ``higher``/``lower`` (adjusted p below alpha), ``equivalent`` (adjusted TOST p
    below alpha: equivalence is claimed only from a test of it), else ``not_resolved``."""
    if not tested:
        return "not_tested"
    if p_adjusted < alpha:
        return "higher" if mean_diff > 0 else "lower"
    if tost_adjusted is not None and tost_adjusted < alpha:
        return "equivalent"
    return "not_resolved"


def holm_family(members: list[dict], key: str) -> list[float | None]:
    """Holm-adjusted ``key`` of each member, or None for all when one lacks it."""
    values = [t.get(key) for t in members]
    if any(v is None for v in values):
        return [None] * len(members)
    return holm_adjust(values)


def apply_plan(tests: list[dict], plan: dict) -> list[dict]:
    """``tests`` with the plan applied, in input order: the primary pair alone at alpha, then each family Holm-corrected
    and tested only when every hypothesis before it was rejected (serial gatekeeping, Dmitrienko, Tamhane & Wiens 2008);
    pairs at another metric are ``secondary``, outside the gate."""
    alpha = plan["alpha"]
    out = [{**t, "family": family_of(t["a"], t["b"], t["metric"], plan)} for t in tests]
    gate_open, previous = True, None
    for family in ("primary", *plan["families"]):
        members = [t for t in out if t["family"] == family]
        _finish(members, family, alpha, gate_open, previous)
        gate_open = gate_open and all(t["p_holm"] < alpha for t in members)
        previous = family
    for metric in dict.fromkeys(t["metric"] for t in out if t["family"] == SECONDARY):
        _finish([t for t in out if t["family"] == SECONDARY and t["metric"] == metric], SECONDARY, alpha, True, None)
    return out


def _finish(members: list[dict], family: str, alpha: float, tested: bool, gate: str | None) -> None:
    """Adjust one family's tests in place and give each its verdict."""
    size = len(members)
    correction = "tested alone" if family == "primary" else f"Holm over the {size} pair{'s' if size != 1 else ''}"
    for test, p, tost_p in zip(members, holm_adjust([t["p_value"] for t in members]),
                               holm_family(members, "tost_p")):
        test.update(p_holm=p, tost_p_holm=tost_p, family_size=size, tested=tested, gate=gate, alpha=alpha,
                    correction=correction,
                    verdict=decide(test["mean_diff"], p, tost_p, tested, alpha))
        test["supported"] = test["verdict"] in ("higher", "lower")
