"""Before and after the change of decision rule: every pair's estimate, interval, p, family and verdict under the
declared plan beside the verdict of the rule it replaced, and how many chains each family needs.

Two sources:

* ``study_rows``: a chain study's results/chains/results.json written by ``chain_stats`` (each pair holds
  the crossed analysis, its plan verdict and the previous rule's verdict under ``previous``): exact.
* ``published_rows``: the published summaries docs/reference/chain_study.json and chain_study_main.json (its seed-42
  chain: the make run it was built from) of a chain study run before the crossed analysis existed. They hold
  per-chain pass@1 but no per-problem values, so the crossed analysis is approximated
  (``power.components_from_summary``): Var(mean difference) = s2_chains / C + se_problems^2, with s2_chains the variance of the per-chain differences (df C - 1) and se_problems the standard error over problems of
  the same pair in the main chain, read from its paired 95% bootstrap interval as width / (2 x 1.96) (df P - 1), both
  combined by Satterthwaite. Counting the main chain's whole problem variance as shared by the chains is the
  conservative reading (it cannot shrink with more chains).

``markdown_table`` renders either as the note's table; ``contrast_table`` does the same for the seed and loss
studies' contrasts against grpo (results/seeds/results.json ``pairs``, results/losses/results.json ``versus``), each
with the previous rule's verdict (``previous``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from thai_grpo.evaluation.plan import apply_plan
from thai_grpo.evaluation.scoring import tost
from thai_grpo.report.plan_words import family_text, fmt_p, verdict_word
from thai_grpo_studies.crossed import satterthwaite_df, t_test
from thai_grpo_studies.power import components_from_summary, crossed_power, family_alpha, units_needed

Z95 = float(stats.norm.ppf(0.975))


def _main_pair(main: dict, a: str, b: str) -> dict | None:
    """The main chain's pass@1 test of a - b from main.json's summaries (vs_sft or pairs), oriented a - b."""
    entry = (main.get("vs_sft", {}).get(a) if b == "sft" else None) or main.get("pairs", {}).get(f"{a} - {b}")
    if entry and entry.get("pass@1"):
        return entry["pass@1"]
    flipped = main.get("pairs", {}).get(f"{b} - {a}")
    if flipped and flipped.get("pass@1"):
        t = flipped["pass@1"]
        return {**t, "diff": -t["diff"], "low": -t["high"], "high": -t["low"]}
    return None


def published_rows(chain_study: dict, main: dict, plan: dict) -> list[dict]:
    """Every pass@1 pair of the published chain study, approximated as the module docstring says, with the plan's
    families and verdicts, the published (previous) verdict and the chains each pair's family needs."""
    seeds = [str(s) for s in chain_study["seeds"]]
    problems = next(iter(main["models"].values()))["problems"]
    models = chain_study["models"]
    tests = []
    for pair, old in chain_study["pairs"].items():
        a, b = pair.split(" - ")
        per_chain = [models[a]["pass1"][s] - models[b]["pass1"][s] for s in seeds]
        main_test = _main_pair(main, a, b)
        if main_test is None:
            raise ValueError(f"main.json has no pass@1 test of {pair}: regenerate docs/reference/main.json")
        se_problems = (main_test["high"] - main_test["low"]) / (2 * Z95)
        chains_term = float(np.var(per_chain, ddof=1)) / len(seeds)
        variance = chains_term + se_problems ** 2
        df = satterthwaite_df([1.0, 1.0], [chains_term, se_problems ** 2], [len(seeds) - 1, problems - 1])
        estimate = float(np.mean(per_chain))
        test = t_test(estimate, variance, df)
        components = components_from_summary(per_chain, se_problems, problems)
        tests.append({"a": a, "b": b, "metric": "pass@1", **test, "per_chain": per_chain, "components": components,
                      "tost_p": tost(estimate, math.sqrt(variance), df, plan["equivalence_margin"]),
                      "margin": plan["equivalence_margin"], "chains": len(seeds), "problems": problems,
                      "previous": {"verdict": old["verdict"], "ci_low": old["low"], "ci_high": old["high"],
                                   "p_holm": old["p_holm"], "t_p_holm": old["t_p_holm"]}})
    return with_power(apply_plan(tests, plan), plan)


def with_power(tests: list[dict], plan: dict) -> list[dict]:
    """Each test with the power of its family's stated effect at its family's level now, and the chains needed for
    the plan's target power (``power.units_needed``; None: more chains alone cannot reach it)."""
    effects, target = plan["power"]["effects"], plan["power"]["target"]
    for t in tests:
        if t["family"] not in effects:
            continue
        alpha = family_alpha(t["family"], t["family_size"], plan["alpha"])
        t["power"] = {"effect": effects[t["family"]], "alpha": alpha,
                      "now": crossed_power(t["components"], t["chains"], t["problems"], effects[t["family"]], alpha),
                      "chains_needed": units_needed(t["components"], t["problems"], effects[t["family"]], alpha,
                                                    target)}
    return tests


def study_rows(study: dict) -> list[dict]:
    """The pass@1 pairs of a chain study's results.json (``chain_stats.chain_study``), with its power per pair."""
    power = {(p["a"], p["b"]): p for p in (study.get("power") or {}).get("pairs", [])}
    rows = []
    for t in (study.get("pairs") or {}).get("pass@1", []):
        p = power.get((t["a"], t["b"]))
        rows.append({**t, **({"power": {"effect": p["effect"], "alpha": p["alpha"], "now": p["power_now"],
                                        "chains_needed": p["chains_needed"]}} if p else {})})
    return rows


def family_needs(rows: list[dict]) -> dict:
    """Per family: its stated effect, level and the most chains any of its pairs needs (None if one cannot)."""
    out: dict[str, dict] = {}
    for t in rows:
        if "power" not in t:
            continue
        entry = out.setdefault(t["family"], {"effect": t["power"]["effect"], "alpha": t["power"]["alpha"],
                                             "chains_needed": 0, "pairs": 0})
        entry["pairs"] += 1
        needed = t["power"]["chains_needed"]
        entry["chains_needed"] = None if needed is None or entry["chains_needed"] is None else \
            max(entry["chains_needed"], needed)
    return out


def _points(value: float) -> str:
    return f"{100 * value:+.1f}"


def markdown_table(rows: list[dict]) -> str:
    """The note's table: pair, estimate, interval from the crossed analysis, df, adjusted p, family, verdict under
    the plan, the previous rule's verdict, and the chains the pair's family needs."""
    header = ["pair (pass@1)", "difference (points)", "crossed 95% interval", "df", "p (adjusted in family)",
              "family", "verdict", "previous rule", "chains for 80%"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for t in rows:
        needed = (t.get("power") or {}).get("chains_needed", "n/a")
        lines.append("| " + " | ".join([
            f"{t['a']} - {t['b']}", _points(t["mean_diff"]), f"[{_points(t['ci_low'])}, {_points(t['ci_high'])}]",
            f"{t['df']:.1f}", fmt_p(t["p_holm"], t.get("p_at_floor")), family_text(t), verdict_word(t),
            (t.get("previous") or {}).get("verdict", "n/a"), "more problems" if needed is None else str(needed)])
            + " |")
    return "\n".join(lines)


def contrast_table(tests: list[dict]) -> str:
    """The seed or loss study's contrasts before and after: estimate, simultaneous interval (Dunnett), degrees of
    freedom, Dunnett-adjusted p, family, verdict under the plan and the previous rule's verdict."""
    header = ["contrast", "difference (points)", "simultaneous 95% interval", "df", "p (Dunnett-adjusted)", "family",
              "verdict", "previous rule"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for t in tests:
        lines.append("| " + " | ".join([
            f"{t['a']} - {t['b']} ({t.get('metric', 'pass@1')})", _points(t["mean_diff"]),
            f"[{_points(t['ci_low'])}, {_points(t['ci_high'])}]", f"{t['df']:.1f}", fmt_p(t["p_holm"]),
            family_text(t), verdict_word(t), (t.get("previous") or {}).get("verdict", "n/a")]) + " |")
    return "\n".join(lines)


def needs_text(needs: dict, target: float) -> str:
    """One line per family: 'primary: 4 chains to detect 10.0 points at level 0.05 (80% power)'."""
    def count(needed):
        return "more held-out problems (no number of chains)" if needed is None else f"{needed} chains"

    return "\n".join(f"{family}: {count(f['chains_needed'])} to detect {100 * f['effect']:.1f} points at level "
                     f"{fmt_p(f['alpha'])} ({target:.0%} power, hardest of its {f['pairs']} "
                     f"pair{'s' if f['pairs'] != 1 else ''})" for family, f in needs.items())
