"""The analysis plan's words, one vocabulary for reports, README and docs, each chosen from the test's own fields."""

from __future__ import annotations

import math

VERDICT_WORDS = {"higher": "higher", "lower": "lower", "equivalent": "equivalent", "not_resolved": "not resolved",
                 "not_tested": "not tested"}
FAMILY_NAMES = {"primary": "primary comparison", "vs_sft": "against SFT", "methods": "between methods",
                "many_to_one": "against the baseline", "secondary": "secondary"}
GATE_NAMES = {"primary": "primary comparison", "vs_sft": "pairs against SFT", "methods": "pairs between methods"}
METRIC_NAMES = {"pass@1": "held-out pass@1", "greedy": "greedy accuracy"}


def fmt_p(p: float | None, at_floor: bool = False) -> str:
    """A p-value as printed: two significant figures below 0.1 (0.0479 -> '0.048'), two decimals from 0.1 ('0.45'),
    '< 0.0001' below 0.0001; '≤ ...' at a bootstrap's floor (no resample as extreme: p is at most this)."""
    if p is None:
        return "n/a"
    if p < 1e-4 and not at_floor:
        return "< 0.0001"
    if p >= 0.1:
        text = f"{p:.2f}"
    else:
        rounded = float(f"{p:.2g}")  # two significant figures first: 9.999e-05 -> 0.00010, not 0.000100
        text = f"{rounded:.{max(2, 1 - math.floor(math.log10(rounded)))}f}"
    return f"≤ {text}" if at_floor else text


def p_text(test: dict, key: str = "p_value", name: str = "p") -> str:
    """'p = 0.012', 'p ≤ 0.0001' (a bootstrap p at its floor 1 / (B + 1)) or 'Holm-adjusted p ≤ 0.0015'."""
    text = fmt_p(test[key], bool(test.get("p_at_floor")))
    return f"{name} {text}" if text[0] in "<≤" else f"{name} = {text}"


def percent(value: float) -> str:
    """0.05 -> '5%'."""
    return f"{100 * value:g}%"


def family_text(test: dict) -> str:
    """A verdict's family and how it was tested: 'against SFT, Holm over the 4 pairs at 5%, gated by ...'."""
    family, alpha = test.get("family"), test.get("alpha", 0.05)
    name = FAMILY_NAMES.get(family, family or "unplanned")
    correction = test.get("correction") or ""
    if family == "secondary":
        metric = METRIC_NAMES.get(test.get("metric"), test.get("metric"))
        return f"secondary ({metric}), {correction}, outside the plan's gate"
    if family == "many_to_one":
        return f"against the baseline {test.get('b')}, {correction} at {percent(alpha)}"
    gate = test.get("gate")
    gated = f", gated by the {GATE_NAMES.get(gate, gate)}" if gate else ""
    return f"{name}, {correction} at {percent(alpha)}{gated}"


def size_points(value: float) -> str:
    """-0.095 -> '9.5 points': the size of a difference, its direction said in words beside it."""
    return f"{abs(100 * value):.1f} points"


def verdict_phrase(test: dict, a: str, b: str) -> str:
    """The verdict in words: 'GRPO higher than SFT', 'A and B equivalent (TOST ...)', 'not resolved (...)', ..."""
    verdict, margin = test["verdict"], test.get("margin")
    if verdict in ("higher", "lower"):
        return f"{a} {verdict} than {b}"
    tost = f"TOST within ±{size_points(margin)}, adjusted {p_text(test, 'tost_p_holm')}" \
        if margin and test.get("tost_p_holm") is not None else ""
    if verdict == "equivalent":
        return f"{a} and {b} equivalent ({tost})"
    if verdict == "not_tested":
        gate = test.get("gate")
        return f"not tested (the {GATE_NAMES.get(gate, gate)} did not all reject)"
    return "not resolved (no difference shown" + (f"; equivalence not shown: {tost})" if tost else ")")


def verdict_word(test: dict) -> str:
    """The table cell: 'higher', 'lower', 'equivalent', 'not resolved' or 'not tested'."""
    return VERDICT_WORDS[test["verdict"]]


def plan_facts(plan: dict) -> dict:
    """The declared plan with its alpha, metric and families named, for report/words.html.j2 ``plan``."""
    return {**plan, "alpha_text": percent(plan["alpha"]), "metric_name": METRIC_NAMES.get(plan["metric"], plan["metric"]),
            "family_names": [FAMILY_NAMES[family] for family in plan["families"]]}
