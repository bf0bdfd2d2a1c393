"""The declared analysis plan (thai_grpo.evaluation.plan): the primary comparison tested alone, families gated in
order, Holm within each, verdicts from the tests, and the config's analysis: section read strictly."""

import pytest

from thai_grpo.evaluation.plan import analysis_plan, apply_plan, decide, holm_adjust
from thai_grpo_studies.many_to_one import apply_many_to_one

MODELS = ["sft", "grpo", "dr_grpo", "rloo"]


def pairs_with(p: dict, diff: float = 0.1, tost_p: float = 0.5) -> list[dict]:
    """Every pair (a listed after b) of MODELS at pass@1 with the raw p of ``p`` (default 0.5), plus a greedy pair."""
    pairs = [(a, b) for i, b in enumerate(MODELS) for a in MODELS[i + 1:]]
    out = [{"a": a, "b": b, "metric": "pass@1", "mean_diff": diff, "p_value": p.get((a, b), 0.5), "tost_p": tost_p}
           for a, b in pairs]
    return out + [{"a": "grpo", "b": "sft", "metric": "greedy", "mean_diff": -0.02, "p_value": 0.001, "tost_p": 0.9}]


def by_pair(tests):
    return {(t["a"], t["b"], t["metric"]): t for t in tests}


def test_the_primary_is_tested_alone_at_alpha_whatever_the_other_pairs():
    plan = analysis_plan(None)
    quiet = by_pair(apply_plan(pairs_with({("grpo", "sft"): 0.04}), plan))
    noisy = by_pair(apply_plan(pairs_with({("grpo", "sft"): 0.04, **{(a, "sft"): 0.001 for a in MODELS[2:]}}), plan))
    for result in (quiet, noisy):
        primary = result[("grpo", "sft", "pass@1")]
        assert primary["family"] == "primary" and primary["family_size"] == 1
        assert primary["p_holm"] == 0.04 and primary["verdict"] == "higher" and primary["correction"] == "tested alone"


def test_a_family_is_tested_only_when_every_hypothesis_before_it_was_rejected():
    plan = analysis_plan(None)
    closed = by_pair(apply_plan(pairs_with({("grpo", "sft"): 0.2, ("rloo", "grpo"): 1e-6}), plan))
    assert closed[("dr_grpo", "sft", "pass@1")]["verdict"] == "not_tested"
    assert closed[("rloo", "grpo", "pass@1")]["verdict"] == "not_tested"  # its own p does not open its gate
    half = {("grpo", "sft"): 0.01, ("dr_grpo", "sft"): 0.001, ("rloo", "sft"): 0.3, ("rloo", "grpo"): 1e-6}
    result = by_pair(apply_plan(pairs_with(half), plan))
    assert result[("dr_grpo", "sft", "pass@1")]["verdict"] == "higher"  # Holm over 2: 0.002
    assert result[("rloo", "sft", "pass@1")]["verdict"] == "not_resolved"
    assert result[("rloo", "grpo", "pass@1")]["verdict"] == "not_tested"
    opened = by_pair(apply_plan(pairs_with({**half, ("rloo", "sft"): 0.02}), plan))
    methods = opened[("rloo", "grpo", "pass@1")]
    assert methods["tested"] and methods["gate"] == "vs_sft" and methods["family_size"] == 3
    assert methods["p_holm"] == pytest.approx(3e-6) and methods["verdict"] == "higher"


def test_secondary_metrics_are_their_own_family_outside_the_gate():
    result = by_pair(apply_plan(pairs_with({("grpo", "sft"): 0.9}), analysis_plan(None)))
    greedy = result[("grpo", "sft", "greedy")]
    assert greedy["family"] == "secondary" and greedy["tested"] and greedy["verdict"] == "lower"


def test_equivalence_needs_its_own_test_and_a_non_rejection_is_not_resolved():
    assert decide(0.01, 0.6, 0.01, True, 0.05) == "equivalent"
    assert decide(0.01, 0.6, 0.2, True, 0.05) == "not_resolved"
    assert decide(0.01, 0.6, None, True, 0.05) == "not_resolved"
    assert decide(-0.2, 0.001, 0.9, True, 0.05) == "lower"
    assert decide(-0.2, 0.001, 0.9, False, 0.05) == "not_tested"
    result = by_pair(apply_plan(pairs_with({("grpo", "sft"): 0.001, **{(a, "sft"): 0.001 for a in MODELS[2:]}},
                                           tost_p=0.001), analysis_plan(None)))
    assert result[("rloo", "dr_grpo", "pass@1")]["verdict"] == "equivalent"  # TOST Holm over 3: 0.003


def test_holm_is_the_step_down_maximum():
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_adjust([]) == []


def test_many_to_one_tests_keep_dunnetts_adjustment():
    tests = [{"a": "dapo", "b": "grpo", "mean_diff": -0.1, "p_value": 0.01, "p_adjusted": 0.03, "tost_p": 0.8},
             {"a": "bnpo", "b": "grpo", "mean_diff": 0.0, "p_value": 0.9, "p_adjusted": 0.99, "tost_p": 0.01}]
    out = apply_many_to_one(tests, analysis_plan(None), "pass@1")
    assert [t["verdict"] for t in out] == ["lower", "equivalent"]
    assert out[0]["family"] == "many_to_one" and out[0]["correction"] == "Dunnett over 2 contrasts"
    assert apply_many_to_one(tests, analysis_plan(None), "greedy")[0]["family"] == "secondary"


def test_the_config_section_is_read_over_the_defaults_and_checked():
    plan = analysis_plan({"analysis": {"alpha": 0.01, "families": ["methods"], "power": {"effects": {"methods": 0.2}}}})
    assert plan["alpha"] == 0.01 and plan["families"] == ["methods"] and plan["primary"] == ["grpo", "sft"]
    assert plan["power"]["effects"] == {"primary": 0.10, "vs_sft": 0.10, "methods": 0.2}
    result = by_pair(apply_plan(pairs_with({("grpo", "sft"): 0.001}), plan))
    assert result[("dr_grpo", "sft", "pass@1")]["family"] == "secondary"  # a family left out of the plan
    assert result[("rloo", "grpo", "pass@1")]["gate"] == "primary"
    with pytest.raises(ValueError, match="two different models"):
        analysis_plan({"analysis": {"primary": ["grpo", "grpo"]}})
