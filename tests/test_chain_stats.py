"""The chain study's statistics (thai_grpo_studies.chain_stats): the crossed analysis under the plan on hand-made
chains."""

import numpy as np
import pytest

from thai_grpo_studies.chain_stats import chain_pair_tests, chain_study
from thai_grpo_studies.crossed import crossed_t_test
from thai_grpo_studies.power import crossed_power


def _scores(correct, n=8):
    correct = np.asarray(correct)
    rate = float(correct.sum() / (n * correct.size))
    return {"per_problem_correct": correct.tolist(), "n_samples": n, "per_problem_greedy": (correct > n / 2).astype(int).tolist(),
            "pass@1": {"estimate": rate, "bootstrap_low": rate - 0.05, "bootstrap_high": rate + 0.05}}


def _three_chains(shifts=(0.15, 0.15, -0.25), seed=7):
    """SFT, ``grpo`` (+0.3 in every chain) and ``flips`` (``shifts`` per chain) on 200 problems x 8 samples."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.1, 0.5, size=200)
    runs = {"sft": [], "grpo": [], "flips": []}
    for chain, shift in zip((42, 1, 2), shifts):
        base = np.clip(p + rng.normal(0, 0.05), 0, 1)
        runs["sft"].append({"seed": chain, "scores": _scores(rng.binomial(8, base))})
        runs["grpo"].append({"seed": chain, "scores": _scores(rng.binomial(8, np.clip(base + 0.3, 0, 1)))})
        runs["flips"].append({"seed": chain, "scores": _scores(rng.binomial(8, np.clip(base + shift, 0, 1)))})
    return runs


def test_a_steady_gain_is_higher_and_a_gain_that_flips_with_the_chain_is_not_resolved():
    """Three chains of 200 problems: the primary grpo gains ~+0.3 in each (higher, tested alone), `flips` gains +0.15
    in two chains and loses 0.25 in the third (not resolved, family against SFT)."""
    study = chain_study(_three_chains(), n_boot=2000, seed=0)
    pairs = {(t["a"], t["b"]): t for t in study["pairs"]["pass@1"]}
    primary, flips = pairs[("grpo", "sft")], pairs[("flips", "sft")]
    assert primary["verdict"] == "higher" and primary["family"] == "primary" and primary["p_holm"] == primary["p_value"]
    assert flips["verdict"] == "not_resolved" and flips["family"] == "vs_sft"
    assert pairs[("flips", "grpo")]["family"] == "methods" and pairs[("flips", "grpo")]["gate"] == "vs_sft"
    assert pairs[("flips", "grpo")]["verdict"] == "not_tested"  # flips - sft did not reject: the gate is closed
    assert "previous" not in primary and "previous_rule" not in study
    matrix = np.stack([r["scores"]["per_problem_correct"] for r in _three_chains()["grpo"]]) / 8 - \
        np.stack([r["scores"]["per_problem_correct"] for r in _three_chains()["sft"]]) / 8
    assert primary["se"] == pytest.approx(crossed_t_test(matrix)["se"])
    grpo = study["models"]["grpo"]
    per_chain = [row["gain_over_sft"]["estimate"] for row in grpo["chains"]]
    assert grpo["gain_over_sft"]["mean"] == pytest.approx(np.mean(per_chain)) == pytest.approx(primary["mean_diff"])
    assert (grpo["gain_over_sft"]["low"], grpo["gain_over_sft"]["high"]) == (primary["ci_low"], primary["ci_high"])
    assert all(row["gain_over_sft"]["low"] < row["gain_over_sft"]["estimate"] < row["gain_over_sft"]["high"]
               for row in grpo["chains"])
    assert study["seeds"] == [42, 1, 2] and "gain_over_sft" not in study["models"]["sft"]
    assert {p["family"] for p in study["power"]["pairs"]} == {"primary", "vs_sft", "methods"}
    needed = study["power"]["families"]["primary"]["chains_needed"]
    assert crossed_power(primary["components"], needed, 200, 0.10) >= 0.8 > crossed_power(primary["components"],
                                                                                          needed - 1, 200, 0.10)


def test_chain_study_refuses_missing_cells_and_a_single_chain():
    runs = _three_chains()
    runs["grpo"][1]["scores"]["per_problem_correct"] = runs["grpo"][1]["scores"]["per_problem_correct"][:-1]
    with pytest.raises(ValueError):
        chain_study(runs, n_boot=10)
    one = {m: rs[:1] for m, rs in _three_chains().items()}
    with pytest.raises(ValueError, match="at least 2 chains, got 1: list more in chains.seeds"):
        chain_study(one, n_boot=10)


def test_chain_study_refuses_chains_out_of_step_with_sft():
    runs = {"sft": [{"seed": 42, "scores": _scores([1, 2])}, {"seed": 1, "scores": _scores([1, 2])}],
            "grpo": [{"seed": 1, "scores": _scores([1, 2])}, {"seed": 42, "scores": _scores([1, 2])}]}
    with pytest.raises(ValueError, match="differ from sft's"):
        chain_study(runs, n_boot=10)


def test_pairwise_tests_cover_every_pair_once():
    rng = np.random.default_rng(0)
    matrices = {m: v + rng.normal(0, 0.05, (2, 4)) for m, v in (("sft", 0.2), ("grpo", 0.5), ("rloo", 0.4))}
    tests = chain_pair_tests(matrices, "pass@1", margin=0.05)
    assert [(t["a"], t["b"]) for t in tests] == [("grpo", "sft"), ("rloo", "sft"), ("rloo", "grpo")]
