"""Sentences of verdict follow the numbers: the same code says "higher", "not resolved" or "not tested", names the
family, and prints p-values honestly."""

import pytest

from thai_grpo.report.plan_words import family_text, fmt_p, p_text, plan_facts, verdict_phrase
from thai_grpo.report.verdicts import health_verdict, narrowing_numbers, pair_test, pass_at_k_verdict, versus_verdict
from thai_grpo_studies.study_words import chain_pair_verdict, large_k_verdict
from thai_grpo.evaluation.plan import analysis_plan


def _pair(a="grpo", b="sft", metric="pass@1", diff=0.284, low=0.24, high=0.327, p=1 / 10001, holm=1 / 10001,
          verdict="higher", family="primary", correction="tested alone", gate=None, floor=True, **extra):
    return {"a": a, "b": b, "metric": metric, "mean_diff": diff, "ci_low": low, "ci_high": high, "p_value": p,
            "n_resamples": 10000, "p_holm": holm, "p_at_floor": floor, "verdict": verdict, "family": family,
            "correction": correction, "gate": gate, "alpha": 0.05, "supported": verdict in ("higher", "lower"),
            **extra}


def test_p_values_print_two_significant_figures_below_0_1_and_a_floor_as_a_bound():
    assert fmt_p(0.0479) == "0.048" and fmt_p(0.0456) == "0.046"  # no "0.05" beside two different verdicts
    assert fmt_p(0.0015) == "0.0015" and fmt_p(0.45) == "0.45" and fmt_p(0.1) == "0.10"
    assert fmt_p(3e-7) == "< 0.0001" and fmt_p(15 / 10001, at_floor=True) == "≤ 0.0015"
    assert p_text({"p_value": 1 / 10001, "p_at_floor": True}) == "p ≤ 0.00010"
    assert p_text({"p_value": 0.0095}) == "p = 0.0095"


def test_versus_verdict_words_the_plans_verdict_with_an_unsigned_size_and_its_family():
    gain = versus_verdict(_pair(), "GRPO", "SFT")
    assert gain == ("GRPO raised held-out pass@1 over SFT by 28.4 points (paired 95% interval over problems "
                    "[+24.0, +32.7] points, p ≤ 0.00010; primary comparison, tested alone at 5%): GRPO higher than "
                    "SFT.")
    # the case the interval alone calls a loss while the family's correction does not: the plan's word wins
    hidden = _pair(metric="greedy", diff=-0.095, low=-0.16, high=-0.03, p=0.0095, holm=0.104, floor=False,
                   verdict="not_resolved", family="secondary", correction="Holm over the 3 pairs")
    sentence = versus_verdict(hidden, "GRPO", "SFT")
    assert sentence == ("GRPO scored 9.5 points below SFT in greedy accuracy (paired 95% interval over problems "
                        "[-16.0, -3.0] points, p = 0.0095, adjusted p = 0.10; secondary (greedy accuracy), Holm over "
                        "the 3 pairs, outside the plan's gate): not resolved (no difference shown).")
    loss = versus_verdict({**hidden, "p_holm": 0.03, "verdict": "lower"}, "RLOO", "SFT")
    assert "RLOO lowered greedy accuracy below SFT by 9.5 points" in loss and loss.endswith("RLOO lower than SFT.")
    assert "+9.5" not in sentence + loss and "by -" not in sentence + loss
    compared = versus_verdict({**hidden, "p_holm": 0.03, "verdict": "lower"}, "Base", "SFT", trained_from=False)
    assert compared.startswith("Base scored 9.5 points below SFT") and compared.endswith("Base lower than SFT.")
    level = versus_verdict({**hidden, "mean_diff": -0.0001, "ci_low": -0.0002, "ci_high": 0.0}, "GRPO", "SFT")
    assert level.startswith("GRPO and SFT are level in greedy accuracy (paired 95% interval over problems [0.0, 0.0]")


def test_equivalence_and_closed_gates_are_said_as_such():
    equivalent = _pair(a="dr_grpo", b="grpo", diff=0.004, verdict="equivalent", family="methods", gate="vs_sft",
                       correction="Holm over the 10 pairs", margin=0.05, tost_p_holm=0.012, floor=False, p=0.7,
                       holm=1.0)
    assert verdict_phrase(equivalent, "Dr.GRPO", "GRPO") == ("Dr.GRPO and GRPO equivalent (TOST within ±5.0 points, "
                                                             "adjusted p = 0.012)")
    assert family_text(equivalent) == "between methods, Holm over the 10 pairs at 5%, gated by the pairs against SFT"
    closed = {**equivalent, "verdict": "not_tested"}
    assert verdict_phrase(closed, "Dr.GRPO", "GRPO") == "not tested (the pairs against SFT did not all reject)"
    open_ = {**equivalent, "verdict": "not_resolved", "tost_p_holm": 0.4}
    assert verdict_phrase(open_, "Dr.GRPO", "GRPO") == ("not resolved (no difference shown; equivalence not shown: "
                                                        "TOST within ±5.0 points, adjusted p = 0.40)")


def test_pair_test_reads_the_pair_either_way_round_and_turns_the_verdict():
    tests = [_pair(a="sft", b="base", diff=0.1, low=0.05, high=0.15, holm=0.02, family="vs_sft"), _pair(),
             _pair(metric="greedy")]
    base = pair_test(tests, "base", "sft")
    assert (base["a"], base["b"], base["mean_diff"], base["ci_low"], base["ci_high"]) == ("base", "sft", -0.1, -0.15,
                                                                                         -0.05)
    assert base["p_holm"] == 0.02 and base["verdict"] == "lower"
    assert pair_test(tests, "grpo", "sft", "greedy")["metric"] == "greedy"
    assert pair_test(tests, "rloo", "sft") is None


def test_a_chain_sentence_gives_the_crossed_interval_degrees_of_freedom_and_family():
    test = _pair(per_chain=[0.1925, 0.2387, 0.2825], df=4.5, floor=False, p=0.0011, holm=0.0011, low=0.153,
                 high=0.323, diff=0.2379)
    assert chain_pair_verdict(test, "GRPO", "SFT", 3) == (
        "GRPO - SFT: +23.8 points over 3 chains (per chain +19.2 points, +23.9 points, +28.2 points; crossed 95% "
        "interval [+15.3, +32.3] points with chain and problem variance, 4.5 degrees of freedom, p = 0.0011; primary "
        "comparison, tested alone at 5%): GRPO higher than SFT.")


def test_the_plan_is_said_before_any_number():
    from html import unescape
    from pathlib import Path

    from thai_grpo.report.html import _environment

    words = _environment(Path(__file__).resolve().parents[1] / "report").get_template("words.html.j2").module
    text = unescape(str(words.plan(plan_facts(analysis_plan(None)))))
    assert text.startswith("Analysis plan, declared in the config (analysis:) before any result: (1) the primary "
                           "comparison grpo - sft at held-out pass@1, tested alone at 5%")
    assert "(3) between methods: every other pair of models, Holm at 5%, tested only when every pair of family (2) " \
           "rejected" in text and "serial gatekeeping" in text and "±5.0 points" in text


def test_pass_at_k_verdict_claims_polish_only_from_the_narrowing_test():
    sft = {"pass_at_k_curve": [0.36, 0.56, 0.68, 0.75, 0.80, 0.84, 0.87, 0.885]}
    polished = {"pass_at_k_curve": [0.65, 0.78, 0.83, 0.86, 0.88, 0.89, 0.89, 0.895]}
    untested = pass_at_k_verdict(sft, polished)
    assert "not tested" in untested and "polish" not in untested
    narrowing = {"k": 4, "gap_at_k": 0.11, "null_gap_at_k": 0.16, "excess_narrowing": 0.05, "low": 0.02,
                 "high": 0.08, "verdict": "polish"}
    polish = pass_at_k_verdict(sft, polished, narrowing=narrowing)
    assert "(polish, not create)" in polish and "interval" not in polish  # plain words; the numbers apart:
    assert narrowing_numbers(narrowing) == (
        "at k = 4 the gap is +11.0 points, against +16.0 points if GRPO had turned the same share of SFT's failed "
        "tries into successes on every problem (the ceiling alone); excess narrowing +5.0 points, 95% interval over "
        "problems [+2.0, +8.0] points")
    within = pass_at_k_verdict(sft, polished, narrowing={**narrowing, "low": -0.01, "verdict": "not_resolved"})
    assert "polish or create is not resolved" in within and "(polish, not create)" not in within
    created = pass_at_k_verdict(sft, polished, narrowing={**narrowing, "high": -0.01, "verdict": "create"})
    assert "narrows by less than the ceiling alone" in created
    worse = {"pass_at_k_curve": [0.30] * 8}
    assert "does not lead" in pass_at_k_verdict(sft, worse)
    assert pass_at_k_verdict({"pass_at_k_curve": [0.3]}, {"pass_at_k_curve": [0.4]}) is None


def test_health_verdict_quotes_the_flags():
    assert "No run-health flag" in health_verdict({"messages": []})
    assert health_verdict({"messages": ["failed run: x"]}) == "failed run: x"


def _kl_summary(k3_gap: tuple[float, float, float], k3_exact_se: float) -> dict:
    stat = lambda m, lo, hi, se=0.003: {"mean": m, "low": lo, "high": hi, "se": se}  # noqa: E731
    return {"tokens": 10488, "completions": 256, "problems": 32, "share_k3_lower_variance": 0.74,
            "means": {"exact": stat(0.061, 0.054, 0.068), "k1": stat(0.063, 0.055, 0.072),
                      "k3": stat(0.061 + k3_gap[0], 0.05, 0.07), "k1_minus_exact": stat(0.002, -0.003, 0.008),
                      "k3_minus_exact": stat(*k3_gap, se=0.002)},
            "exact_se": {"k1": 0.0029, "k3": k3_exact_se},
            "regimes": [{"low": 0.0, "high": 1e-3, "tokens": 5957, "winner": "k3"},
                        {"low": 1e-3, "high": float("inf"), "tokens": 4531, "winner": "k1"}]}


def kl_estimator_verdict(summary: dict) -> str:
    """The report's words on k1 vs k3 (report/kl_verdict.html.j2) from ``kl_takeaway``'s numbers, as a reader reads
    them (tags dropped, white space collapsed)."""
    import re
    from html import unescape

    from thai_grpo.report.html import DEFAULT_TEMPLATE_DIR, _environment
    from thai_grpo.report.verdicts import kl_takeaway

    macro = _environment(DEFAULT_TEMPLATE_DIR).get_template("kl_verdict.html.j2").module.kl_verdict
    text = str(macro(summary, kl_takeaway(summary)))
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", text))).strip()


def test_kl_estimator_verdict_follows_the_numbers():
    heavy = kl_estimator_verdict(_kl_summary((-0.018, -0.022, -0.014), 0.037))
    assert "k1's interval holds the exact KL" in heavy and "k3's interval excludes the exact KL" in heavy
    assert "(95% bootstrap over problems: the 32 problems resampled, each with all its completions)" in heavy
    assert "k1 is the more precise estimator here (12.8x)" in heavy and "too narrow" in heavy
    assert "k3 where the exact KL is in [0, 0.001) (5,957 tokens)" in heavy
    close = kl_estimator_verdict(_kl_summary((0.0005, -0.001, 0.002), 0.0021))
    assert "k3's interval holds the exact KL" in close and "k3 is the more precise estimator" in close
    assert "too narrow" not in close
    same = kl_estimator_verdict({**_kl_summary((0.0, 0.0, 0.0), 0.0), "exact_se": {"k1": 0.0, "k3": 0.0}})
    assert "both exact: policy and reference agree" in same  # a policy that never moved (rehearsal stand-ins)
    old = {key: value for key, value in _kl_summary((0.0, 0.0, 0.0), 0.003).items() if key != "problems"}
    assert "95% bootstrap over completions, from a run that did not record" in kl_estimator_verdict(old)


def _passk(mean, low, high, created=3, lost=1) -> dict:
    from thai_grpo_studies.large_k import crossing

    difference = {"mean": mean, "low": low, "high": high}
    return {"n_samples": len(mean), "num_problems": 100,
            "comparisons": {"grpo_vs_sft": {"difference": difference, "crossing": crossing(difference),
                                            "created": created, "lost": lost, "both": 90, "neither": 6}}}


def test_large_k_verdict_says_where_the_curves_meet_or_that_they_do_not():
    meets = large_k_verdict(_passk([0.3, 0.1, 0.02, -0.01], [0.25, 0.05, -0.01, -0.04], [0.35, 0.15, 0.05, 0.02]))
    assert "first holds 0 at k = 3" in meets and "SFT never leads" in meets and "cross at k = 4" in meets
    assert "GRPO created 3" in meets and "lost 1" in meets
    crosses = large_k_verdict(_passk([0.3, 0.0, -0.1], [0.2, -0.05, -0.15], [0.4, 0.05, -0.05]))
    assert "SFT leads (interval on the other side of 0) at k = 3: the curves cross (1 of 3 pointwise" in crosses
    assert "still at k = 3" in crosses
    brief = large_k_verdict(_passk([0.3, 0.0, -0.1, -0.1, -0.05, -0.02], [0.2, -0.05, -0.15, -0.15, -0.1, -0.07],
                                   [0.4, 0.05, -0.05, -0.01, 0.01, 0.03]))
    assert "at k = 3-4: the curves cross (2 of 6" in brief and "holds 0 again at k = 6" in brief
    ahead = large_k_verdict(_passk([0.3, 0.2, 0.1], [0.2, 0.1, 0.05], [0.4, 0.3, 0.15]))
    assert "GRPO stays ahead at every k up to 3" in ahead and "never cross" in ahead
    assert large_k_verdict({"comparisons": {}}) is None


def test_kl_takeaway_names_the_more_precise_estimator_against_the_chapters_k3():
    from thai_grpo.report.verdicts import kl_takeaway

    k1_wins = kl_takeaway({**_kl_summary((0.0, -0.001, 0.001), 0.0116), "exact_se": {"k1": 0.0029, "k3": 0.0116}})
    assert {key: k1_wins[key] for key in ("better", "worse", "tie", "agrees")} == {
        "better": "k1", "worse": "k3", "tie": False, "agrees": False}
    assert k1_wins["ratio"] == pytest.approx(4.0) and k1_wins["holds"] == {"k1": True, "k3": True}
    assert k1_wins["wins"]["k3"]["tokens"] == 5957 and k1_wins["blind"] == ["k3"]
    assert kl_takeaway(_kl_summary((0.0, -0.001, 0.001), 0.001))["agrees"] is True
    assert kl_takeaway({**_kl_summary((0.0, 0.0, 0.0), 0.0), "exact_se": {"k1": 0.0, "k3": 0.0}})["ratio"] is None
