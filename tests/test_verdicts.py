"""Sentences of verdict follow the numbers: the same code says "supported", "not detectable" or "a loss"."""

from thai_grpo.report.verdicts import (health_verdict, holm_family, holm_family_short, holm_word, kl_estimator_verdict,
                                       large_k_verdict, p_text, pair_test, pass_at_k_verdict, versus_verdict)


def _pair(a="grpo", b="sft", metric="pass@1", diff=0.284, low=0.24, high=0.327, p=0.0, holm=0.0, supported=True):
    return {"a": a, "b": b, "metric": metric, "mean_diff": diff, "ci_low": low, "ci_high": high, "p_value": p,
            "n_resamples": 10000, "p_holm": holm, "supported": supported, "correction": "Holm over 3 pairs"}


def test_versus_verdict_words_the_holm_verdict_with_an_unsigned_size():
    gain = versus_verdict(_pair(), "GRPO", "SFT")
    assert gain.startswith("GRPO raised held-out pass@1 over SFT by 28.4 points") and "a supported gain" in gain
    assert "[+24.0, +32.7] points" in gain and "p < 0.0001 (10,000 resamples); Holm-adjusted p < 0.0001)" in gain
    # the case the interval alone calls a loss while Holm over the family does not: the note's word wins
    hidden = _pair(metric="greedy", diff=-0.095, low=-0.16, high=-0.03, p=0.0095, holm=0.104, supported=False)
    sentence = versus_verdict(hidden, "GRPO", "SFT")
    assert sentence == ("GRPO scored 9.5 points below SFT in greedy accuracy (paired 95% interval [-16.0, -3.0] "
                        "points, p = 0.0095; Holm-adjusted p = 0.104): not distinguishable.")
    loss = versus_verdict({**hidden, "p_holm": 0.03, "supported": True}, "RLOO", "SFT")
    assert "RLOO lowered greedy accuracy below SFT by 9.5 points" in loss and "a supported loss" in loss
    assert "+9.5" not in sentence + loss and "by -" not in sentence + loss
    compared = versus_verdict({**hidden, "p_holm": 0.03, "supported": True}, "Base", "SFT", trained_from=False)
    assert compared.startswith("Base scored 9.5 points below SFT") and compared.endswith("a supported difference.")
    assert p_text(hidden) == "p = 0.0095"
    level = versus_verdict({**hidden, "mean_diff": -0.0001, "ci_low": -0.0002, "ci_high": 0.0}, "GRPO", "SFT")
    assert level.startswith("GRPO and SFT are level in greedy accuracy (paired 95% interval [0.0, 0.0] points")


def test_pair_test_reads_the_pair_either_way_round():
    tests = [_pair(a="sft", b="base", diff=0.1, low=0.05, high=0.15, holm=0.02), _pair(), _pair(metric="greedy")]
    base = pair_test(tests, "base", "sft")
    assert (base["a"], base["b"], base["mean_diff"], base["ci_low"], base["ci_high"]) == ("base", "sft", -0.1, -0.15,
                                                                                         -0.05)
    assert base["p_holm"] == 0.02 and holm_word(base) == "supported"
    assert pair_test(tests, "grpo", "sft", "greedy")["metric"] == "greedy"
    assert pair_test(tests, "rloo", "sft") is None
    assert holm_family(tests, "pass@1") == "Holm over the 2 pairs of held-out pass@1 among base, sft, grpo"


def test_a_verdict_sentence_names_its_holm_family():
    tests = [_pair(a="sft", b="base"), _pair(), _pair(metric="greedy")]
    family = holm_family_short(tests, "pass@1")
    assert family == "Holm over the 2 pairs of held-out pass@1"
    sentence = versus_verdict(pair_test(tests, "grpo", "sft"), "GRPO", "SFT", family=family)
    assert sentence.endswith("Holm-adjusted p < 0.0001, Holm over the 2 pairs of held-out pass@1): a supported gain.")
    assert holm_family_short(tests, "greedy") == "Holm over the 1 pair of greedy accuracy"


def test_pass_at_k_verdict_says_whether_the_gap_closes():
    sft = {"pass_at_k_curve": [0.36, 0.56, 0.68, 0.75, 0.80, 0.84, 0.87, 0.885]}
    polished = {"pass_at_k_curve": [0.65, 0.78, 0.83, 0.86, 0.88, 0.89, 0.89, 0.895]}
    assert "narrows" in pass_at_k_verdict(sft, polished) and "k = 8" in pass_at_k_verdict(sft, polished)
    created = {"pass_at_k_curve": [0.40, 0.62, 0.75, 0.84, 0.90, 0.94, 0.97, 0.99]}  # gap 0.04 at k=1, 0.105 at 8
    assert "does not narrow" in pass_at_k_verdict(sft, created)
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


def _passk(mean, low, high, created=3, lost=1) -> dict:
    from thai_grpo.evaluation.large_k import crossing

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
