"""The studies' sentences of verdict, computed from their numbers: the large-k comparison (polish or create), a
contrast of the seed or loss study, a pair of the chain study. Each study's script stores them in its results.json,
where the main report reads them.
"""

from __future__ import annotations

from thai_grpo.report.plan_words import family_text, verdict_phrase
from thai_grpo.report.results import METHODS
from thai_grpo.report.verdicts import bound, p_pair, points


def _band_points(difference: dict, k: int) -> str:
    return (f"{points(difference['mean'][k - 1])} [{points(difference['low'][k - 1])}, "
            f"{points(difference['high'][k - 1])}]")


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
    return (f"{a} - {b}: {points(test['mean_diff'])}{seeds} (pooled, seed as block: simultaneous 95% interval "
            f"[{bound(test['ci_low'])}, {bound(test['ci_high'])}] points, {p_pair(test)}; {family_text(test)}): "
            f"{verdict_phrase(test, a, b)}.")


def chain_pair_verdict(test: dict, a: str, b: str, chains: int) -> str:
    """One sentence on a pair of the chain study (``chain_stats.chain_pair_tests``): the mean difference over chains
    and problems, the per-chain differences, the crossed analysis' 95% interval, degrees of freedom and p, its family
    and the plan's verdict."""
    per_chain = ", ".join(points(d) for d in test.get("per_chain") or [])
    return (f"{a} - {b}: {points(test['mean_diff'])} over {chains} chains (per chain {per_chain}; crossed 95% "
            f"interval [{bound(test['ci_low'])}, {bound(test['ci_high'])}] points with chain and problem variance, "
            f"{test['df']:.1f} degrees of freedom, {p_pair(test)}; {family_text(test)}): "
            f"{verdict_phrase(test, a, b)}.")


def method_name(variant: str) -> str:
    """'grpo' -> 'GRPO', 'dr_grpo' -> 'Dr.GRPO'; a variant the comparison has no row for keeps its config name."""
    return METHODS[variant][0] if variant in METHODS else variant


def with_sentences(pairs: list[dict], chains: int | None = None) -> list[dict]:
    """Each tested pair of a study with its sentence (a seed or loss study's contrast, or with ``chains`` a pair of
    the chain study), the way the main report shows it; a pair recorded without a verdict keeps none."""
    def sentence(t: dict) -> str:
        a, b = method_name(t["a"]), method_name(t["b"])
        return seed_pair_verdict(t, a, b) if chains is None else chain_pair_verdict(t, a, b, chains)

    return [{**t, "sentence": sentence(t)} if "verdict" in t else t for t in pairs]
