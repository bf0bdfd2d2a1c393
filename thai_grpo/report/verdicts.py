"""Sentences of verdict, computed from the numbers they summarise (never written in advance).

Each function takes the parts of results.json it speaks about and returns plain text; the report and the
README quote these sentences, so a run that says "no" makes the report say "no".
"""

from __future__ import annotations

from thai_grpo.report.plan_words import METRIC_NAMES, family_text, p_text, verdict_phrase


def _points(value: float) -> str:
    """0.0431 -> '+4.3 points' (percentage points, signed; a difference that rounds to 0 has no sign)."""
    text = f"{100 * value:.1f}"
    return f"{text.lstrip('-')} points" if float(text) == 0 else f"{'+' if value > 0 else ''}{text} points"


def _bound(value: float) -> str:
    """0.083 -> '+8.3', -0.0001 -> '0.0': an interval bound in signed points, no sign on zero."""
    text = f"{100 * value:+.1f}"
    return "0.0" if float(text) == 0 else text


def _size(value: float) -> str:
    """-0.095 -> '9.5 points': the size of a difference, its direction said in words beside it."""
    return f"{abs(100 * value):.1f} points"


FLIP = {"higher": "lower", "lower": "higher"}


def oriented(test: dict, model: str) -> dict:
    """A pairwise test (``a`` - ``b``) turned to read ``model`` - the other model: the difference, its intervals and
    per-chain values change sign and ``higher`` / ``lower`` swap; the p-values and families do not."""
    if test["a"] == model:
        return test
    turned = {**test, "a": test["b"], "b": test["a"], "mean_diff": -test["mean_diff"], "ci_low": -test["ci_high"],
              "ci_high": -test["ci_low"]}
    if "verdict" in test:  # a test recorded without a verdict keeps none
        turned["verdict"] = FLIP.get(test["verdict"], test["verdict"])
    if "per_chain" in test:
        turned["per_chain"] = [-x for x in test["per_chain"]]
    if isinstance(test.get("previous"), dict) and "ci_low" in test["previous"]:
        turned["previous"] = {**test["previous"], "ci_low": -test["previous"]["ci_high"],
                              "ci_high": -test["previous"]["ci_low"]}
    return turned


def pair_test(pairwise: list[dict], model: str, other: str, metric: str = "pass@1") -> dict | None:
    """The test of ``model`` - ``other`` on ``metric`` from ``comparison.pairwise`` (the statistics note's table);
    None when the run has no such test."""
    for test in pairwise:
        if test["metric"] == metric and {test["a"], test["b"]} == {model, other}:
            return oriented(test, model)
    return None


def _p_pair(test: dict) -> str:
    """'p ≤ 0.0001' for a family of one (the primary), else the raw and the family-adjusted p."""
    raw = p_text(test)
    if test.get("family") == "primary" or test.get("p_holm") is None:
        return raw
    return f"{raw}, adjusted {p_text(test, 'p_holm')}"


def versus_verdict(test: dict, after: str, before: str, trained_from: bool = True) -> str:
    """One paired difference over problems (``pair_test``) in a sentence: its size in words (never a signed size),
    its 95% interval over problems, raw and family-adjusted p, its family (``plan_words.family_text``) and the
    plan's verdict. ``trained_from``: ``after`` was trained from ``before`` (it raised or lowered the metric), else
    the two are only compared."""
    metric, diff = METRIC_NAMES.get(test["metric"], test["metric"]), test["mean_diff"]
    interval = f"[{_bound(test['ci_low'])}, {_bound(test['ci_high'])}]"
    numbers = f"(paired 95% interval over problems {interval} points, {_p_pair(test)}; {family_text(test)})"
    phrase = verdict_phrase(test, after, before)
    if _size(diff) == "0.0 points":
        return f"{after} and {before} are level in {metric} {numbers}: {phrase}."
    if test["verdict"] in ("higher", "lower") and trained_from:
        verb, word = ("raised", "over") if diff > 0 else ("lowered", "below")
        return f"{after} {verb} {metric} {word} {before} by {_size(diff)} {numbers}: {phrase}."
    return f"{after} scored {_size(diff)} {'above' if diff > 0 else 'below'} {before} in {metric} {numbers}: {phrase}."


def pass_at_k_verdict(before: dict, after: dict, names: tuple[str, str] = ("SFT", "GRPO"),
                      narrowing: dict | None = None) -> str | None:
    """Does the gap between two models' pass@k curves narrow at large k by more than the ceiling makes it narrow
    ("polish, not create")? The curves (``pass_at_k_curve``: k = 1..n) at k = 1 and the largest k both have, then
    ``narrowing`` (``evaluation.narrowing.narrowing_test``): the excess narrowing over a uniform improvement with its
    interval decides; without it no claim is made."""
    curve_b, curve_a = before.get("pass_at_k_curve") or [], after.get("pass_at_k_curve") or []
    last = min(len(curve_b), len(curve_a))  # curves are pass@k for k = 1..n
    if last < 2:
        return None
    gap_first, gap_last = curve_a[0] - curve_b[0], curve_a[last - 1] - curve_b[last - 1]
    b, a = names
    text = f"{a} - {b}: {_points(gap_first)} at k = 1, {_points(gap_last)} at k = {last}. "
    if gap_first <= 0:
        return text + f"{a} does not lead at k = 1, so there is nothing to polish in these numbers."
    if not narrowing:
        return text + ("pass@k is capped at 1, so a gap narrows as k grows even when every problem improved alike; "
                       "whether it narrows more than that is not tested in this run.")
    k = narrowing["k"]
    numbers = (f"at k = {k} the gap is {_points(narrowing['gap_at_k'])}, against {_points(narrowing['null_gap_at_k'])} "
               f"if {a} had turned the same share of {b}'s failed tries into successes on every problem (the "
               f"ceiling alone); excess narrowing {_points(narrowing['excess_narrowing'])}, 95% interval over problems "
               f"[{_bound(narrowing['low'])}, {_bound(narrowing['high'])}] points")
    if narrowing["verdict"] == "polish":
        return text + (f"The gap narrows by more than the ceiling makes it narrow ({numbers}): {a} mostly moves "
                       f"answers {b} could already reach to the first try (polish, not create).")
    if narrowing["verdict"] == "create":
        return text + (f"The gap narrows by less than the ceiling alone would make it ({numbers}): {a} gains more on "
                       f"problems {b} rarely reached than a uniform improvement would.")
    return text + (f"The narrowing is what the ceiling alone produces, within the noise ({numbers}): polish or create "
                   "is not resolved.")


def health_verdict(health: dict) -> str:
    """'no health flag raised' or the flags' own messages."""
    messages = health.get("messages") or []
    return " ".join(messages) if messages else "No run-health flag was raised (truncation, reward hacking)."


def kl_takeaway(summary: dict) -> dict:
    """k1 against k3 on the run's own tokens (``kl.real_kl_summary``), as numbers and verdicts for the template: which
    one has the smaller exact standard error and by what factor (``agrees``: it is the chapter's k3); whether each
    one's bootstrap interval holds the exact KL (``holds``); which ones the bootstrap saw under half of the exact
    standard error of (``blind``: their variance sits in tokens pi rarely samples, so their interval is too narrow);
    and per estimator the regimes of per-position KL it wins, with their tokens (``wins``)."""
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


def _band_points(difference: dict, k: int) -> str:
    return (f"{_points(difference['mean'][k - 1])} [{_points(difference['low'][k - 1])}, "
            f"{_points(difference['high'][k - 1])}]")


def _k_ranges(ks: list[int]) -> str:
    """[3, 4, 5, 9] -> '3-5, 9'."""
    runs: list[list[int]] = []
    for k in ks:
        if runs and k == runs[-1][-1] + 1:
            runs[-1].append(k)
        else:
            runs.append([k])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


def large_k_verdict(passk: dict, after: str = "grpo", before: str = "sft", names=("GRPO", "SFT")) -> str | None:
    """Polish or create (results/passk/results.json, ``large_k.large_k_results``): the paired difference of two
    pass@k curves at k = 1 and k = n, where its 95% band first holds 0 or flips sign (``crossing``), and the problems
    created and lost in n tries."""
    comparison = (passk.get("comparisons") or {}).get(f"{after}_vs_{before}")
    if not comparison:
        return None
    a, b = names
    n, difference, cross = passk["n_samples"], comparison["difference"], comparison["crossing"]
    text = [f"On {passk['num_problems']} held-out problems x {n} samples, {a} - {b} is {_band_points(difference, 1)} "
            f"at k = 1 and {_band_points(difference, n)} at k = {n} (paired 95% bootstrap over problems)."]
    lead = cross["lead_at_1"]
    if lead == 0:
        text.append("Their difference is not resolved even at k = 1 (the band holds 0).")
    else:
        ahead, behind = (a, b) if lead > 0 else (b, a)
        if cross["first_k_includes_zero"] is None:
            text.append(f"{ahead} stays ahead at every k up to {n}: the curves do not meet within the intervals.")
        else:
            text.append(f"The interval first holds 0 at k = {cross['first_k_includes_zero']}: from there {ahead} and "
                        f"{behind} are not resolved apart (pointwise)")
            text[-1] += (f", and {behind} leads (interval on the other side of 0) at k = "
                         f"{_k_ranges(cross['k_reversed'])}: the curves cross" if cross["k_reversed"] else
                         f"; {behind} never leads within the intervals up to k = {n}")
            if cross["k_reversed"]:
                again = "the interval holds 0 again" if cross["includes_zero_at_n"] else "still"
                text[-1] += (f" ({len(cross['k_reversed'])} of {n} pointwise intervals, uncorrected for looking at "
                             f"{n} values of k; {again} at k = {n})")
            text[-1] += "."
    flip = cross["first_k_sign_flip"]
    text.append(f"The point estimates {'cross at k = ' + str(flip) if flip else 'never cross'}.")
    text.append(f"Per problem, {a} created {comparison['created']} (solved at least once in {n}, never by {b} in "
                f"{n}) and lost {comparison['lost']} (the reverse); both solved {comparison['both']}, neither "
                f"{comparison['neither']}.")
    return " ".join(text)


def seed_pair_verdict(test: dict, a: str, b: str) -> str:
    """One sentence on a contrast of the seed or loss study (``seed_stats.versus_baseline``): the mean difference over
    seeds and problems, its Dunnett simultaneous 95% interval, raw and Dunnett-adjusted p, its family and the plan's
    verdict."""
    seeds = f" over {test['seeds']} seeds" if test.get("seeds") else ""
    return (f"{a} - {b}: {_points(test['mean_diff'])}{seeds} (pooled, seed as block: simultaneous 95% interval "
            f"[{_bound(test['ci_low'])}, {_bound(test['ci_high'])}] points, {_p_pair(test)}; {family_text(test)}): "
            f"{verdict_phrase(test, a, b)}.")


def chain_pair_verdict(test: dict, a: str, b: str, chains: int) -> str:
    """One sentence on a pair of the chain study (``chain_stats.chain_pair_tests``): the mean difference over chains
    and problems, the per-chain differences, the crossed analysis' 95% interval, degrees of freedom and p, its family
    and the plan's verdict."""
    per_chain = ", ".join(_points(d) for d in test.get("per_chain") or [])
    return (f"{a} - {b}: {_points(test['mean_diff'])} over {chains} chains (per chain {per_chain}; crossed 95% "
            f"interval [{_bound(test['ci_low'])}, {_bound(test['ci_high'])}] points with chain and problem variance, "
            f"{test['df']:.1f} degrees of freedom, {_p_pair(test)}; {family_text(test)}): "
            f"{verdict_phrase(test, a, b)}.")
