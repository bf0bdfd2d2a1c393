"""Sentences of verdict follow the numbers: the same code says "supported", "not detectable" or "a loss"."""

from thai_grpo.verdicts import difference_verdict, health_verdict, p_text, pass_at_k_verdict


def test_difference_verdict_follows_the_interval():
    gain = {"mean_diff": 0.284, "ci_low": 0.24, "ci_high": 0.327, "p_value": 0.0, "n_resamples": 10000}
    assert "a supported gain" in difference_verdict(gain, "GRPO", "SFT")
    assert "+28.4 points" in difference_verdict(gain, "GRPO", "SFT")
    assert "p < 0.0001 (10,000 resamples)" in difference_verdict(gain, "GRPO", "SFT")
    null = {"mean_diff": -0.013, "ci_low": -0.027, "ci_high": 0.002, "p_value": 0.097, "n_resamples": 10000}
    assert "do not differ detectably" in difference_verdict(null, "GRPO", "SFT") and "includes 0" in \
        difference_verdict(null, "GRPO", "SFT")
    loss = {"mean_diff": -0.05, "ci_low": -0.09, "ci_high": -0.01, "p_value": 0.01, "n_resamples": 1000}
    assert "a supported loss" in difference_verdict(loss, "RLOO", "GRPO")
    assert p_text(loss) == "p = 0.01"


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
