"""Sentences of verdict computed from the numbers they summarise: a run that says "no" makes the report say "no"."""

from __future__ import annotations

from thai_grpo.report.plan_words import METRIC_NAMES, family_text, p_text, size_points, verdict_phrase


def points(value: float) -> str:
    """0.0431 -> '+4.3 points' (percentage points, signed; a difference that rounds to 0 has no sign)."""
    return f"{bound(value)} points"


def bound(value: float) -> str:
    """0.083 -> '+8.3', -0.0001 -> '0.0': an interval bound in signed points, no sign on zero."""
    text = f"{100 * value:+.1f}"
    return "0.0" if float(text) == 0 else text


FLIP = {"higher": "lower", "lower": "higher"}


def oriented(test: dict, model: str) -> dict:
    """A pairwise test (``a`` - ``b``) turned to read ``model`` - the other: signs flip, higher and lower swap."""
    if test["a"] == model:
        return test
    turned = {**test, "a": test["b"], "b": test["a"], "mean_diff": -test["mean_diff"], "ci_low": -test["ci_high"],
              "ci_high": -test["ci_low"]}
    if "verdict" in test:  # a test recorded without a verdict keeps none
        turned["verdict"] = FLIP.get(test["verdict"], test["verdict"])
    if "per_chain" in test:
        turned["per_chain"] = [-x for x in test["per_chain"]]
    return turned


def pair_test(pairwise: list[dict], model: str, other: str, metric: str = "pass@1") -> dict | None:
    """The test of ``model`` - ``other`` on ``metric`` from ``comparison.pairwise``, or None."""
    for test in pairwise:
        if test["metric"] == metric and {test["a"], test["b"]} == {model, other}:
            return oriented(test, model)
    return None


def p_pair(test: dict) -> str:
    """'p ≤ 0.0001' for a family of one (the primary), else the raw and the family-adjusted p."""
    raw = p_text(test)
    if test.get("family") == "primary" or test.get("p_holm") is None:
        return raw
    return f"{raw}, adjusted {p_text(test, 'p_holm')}"


def versus_verdict(test: dict, after: str, before: str, trained_from: bool = True) -> str:
    """One paired difference in a sentence; ``trained_from``: ``after`` was trained from ``before``."""
    metric, diff = METRIC_NAMES.get(test["metric"], test["metric"]), test["mean_diff"]
    interval = f"[{bound(test['ci_low'])}, {bound(test['ci_high'])}]"
    numbers = f"(paired 95% interval over problems {interval} points, {p_pair(test)}; {family_text(test)})"
    phrase = verdict_phrase(test, after, before)
    if size_points(diff) == "0.0 points":
        return f"{after} and {before} are level in {metric} {numbers}: {phrase}."
    if test["verdict"] in ("higher", "lower") and trained_from:
        verb, word = ("raised", "over") if diff > 0 else ("lowered", "below")
        return f"{after} {verb} {metric} {word} {before} by {size_points(diff)} {numbers}: {phrase}."
    return f"{after} scored {size_points(diff)} {'above' if diff > 0 else 'below'} {before} in {metric} {numbers}: {phrase}."


def pass_at_k_verdict(before: dict, after: dict, names: tuple[str, str] = ("SFT", "GRPO"),
                      narrowing: dict | None = None) -> str | None:
    """Does the gap between two pass@k curves narrow more than the ceiling makes it? ``narrowing`` decides, if given."""
    curve_b, curve_a = before.get("pass_at_k_curve") or [], after.get("pass_at_k_curve") or []
    last = min(len(curve_b), len(curve_a))  # curves are pass@k for k = 1..n
    if last < 2:
        return None
    gap_first, gap_last = curve_a[0] - curve_b[0], curve_a[last - 1] - curve_b[last - 1]
    b, a = names
    text = f"{a} - {b}: {points(gap_first)} at k = 1, {points(gap_last)} at k = {last}. "
    if gap_first <= 0:
        return text + f"{a} does not lead at k = 1, so there is nothing to polish in these numbers."
    if not narrowing:
        return text + ("pass@k is capped at 1, so a gap narrows as k grows even when every problem improved alike; "
                       "whether it narrows more than that is not tested in this run.")
    if narrowing["verdict"] == "polish":
        return text + (f"The gap narrows by more than the ceiling makes it narrow (pass@k cannot pass 100%, so any gap "
                       f"shrinks as k grows): {a} mostly moves answers {b} could already reach to the first try "
                       "(polish, not create).")
    if narrowing["verdict"] == "create":
        return text + (f"The gap narrows by less than the ceiling alone would make it: {a} gains more on problems {b} "
                       "rarely reached than a uniform improvement would.")
    return text + "The narrowing is what the ceiling alone produces, within the noise: polish or create is not resolved."


def narrowing_numbers(narrowing: dict, names: tuple[str, str] = ("SFT", "GRPO")) -> str:
    """The narrowing test behind ``pass_at_k_verdict``'s words: the gap at k against the ceiling's, and the excess."""
    b, a = names
    return (f"at k = {narrowing['k']} the gap is {points(narrowing['gap_at_k'])}, against "
            f"{points(narrowing['null_gap_at_k'])} if {a} had turned the same share of {b}'s failed tries into "
            f"successes on every problem (the ceiling alone); excess narrowing {points(narrowing['excess_narrowing'])}, "
            f"95% interval over problems [{bound(narrowing['low'])}, {bound(narrowing['high'])}] points")


def health_verdict(health: dict) -> str:
    """'no health flag raised' or the flags' own messages."""
    messages = health.get("messages") or []
    return " ".join(messages) if messages else "No run-health flag was raised (truncation, reward hacking, lost updates)."


def kl_takeaway(summary: dict) -> dict:
    """k1 against k3: which has the smaller exact standard error and by what factor, whether each bootstrap interval
    holds the exact KL, which one the bootstrap saw under half its exact error (``blind``), the regimes each wins."""
    means, exact_se = summary["means"], summary["exact_se"]
    better, worse = sorted(("k1", "k3"), key=lambda name: exact_se[name])
    ratio = exact_se[worse] / exact_se[better] if exact_se[better] > 0 else None
    wins = {name: [r for r in summary["regimes"] if r["winner"] == name] for name in ("k1", "k3")}
    return {"better": better, "worse": worse, "ratio": ratio, "tie": exact_se[worse] == exact_se[better],
            "agrees": better == "k3" and exact_se[worse] != exact_se[better],
            "holds": {name: means[f"{name}_minus_exact"]["low"] <= 0 <= means[f"{name}_minus_exact"]["high"]
                      for name in ("k1", "k3")},
            "blind": [name for name in ("k1", "k3") if exact_se[name] > 2 * means[f"{name}_minus_exact"]["se"]],
            "wins": {name: {"regimes": rows, "tokens": sum(r["tokens"] for r in rows)}
                     for name, rows in wins.items() if rows}}
