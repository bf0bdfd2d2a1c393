"""The chain study's statistics (thai_grpo_studies.chain_stats): the crossed analysis under the plan on hand-made
chains, and the superseded rule (kept for the comparison) against exact enumeration."""

from itertools import product

import numpy as np
import pytest

from thai_grpo_studies.chain_stats import (chain_pair_tests, chain_study, chain_verdict, crossed_bootstrap_means,
                                              paired_chain_t, previous_rule)
from thai_grpo_studies.crossed import crossed_t_test
from thai_grpo_studies.power import crossed_power


def exact_crossed_bootstrap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Every equally likely resample of chains and problems (C^C x P^P index tuples): mean a - b over the draw."""
    chains, problems = a.shape
    values = []
    for cs in product(range(chains), repeat=chains):
        for ps in product(range(problems), repeat=problems):
            rows = np.ix_(cs, ps)
            values.append(a[rows].mean() - b[rows].mean())
    return np.asarray(values)


def test_crossed_bootstrap_matches_exact_enumeration_on_a_tiny_case():
    """2 chains x 3 problems, 2 models: the bootstrap's draws of the difference have the exact distribution's mean,
    variance and P(difference <= 0) (108 equally likely resamples)."""
    a = np.array([[1.0, 0.5, 0.25], [0.75, 1.0, 0.0]])
    b = np.array([[0.5, 0.5, 0.0], [0.25, 0.75, 0.5]])
    exact = exact_crossed_bootstrap(a, b)
    draws = crossed_bootstrap_means([a, b], n_boot=200_000, seed=3)
    boot = draws[:, 0] - draws[:, 1]
    assert boot.mean() == pytest.approx(exact.mean(), abs=0.003)
    assert boot.var() == pytest.approx(exact.var(), rel=0.02)
    assert np.mean(boot <= 0) == pytest.approx(np.mean(exact <= 0), abs=0.005)


def test_crossed_bootstrap_keeps_the_pairing_by_chain():
    """A method that adds the same 0.2 to every problem of every chain differs from SFT by exactly 0.2 in every
    resample, however much the chains themselves differ: chains are drawn once for both models."""
    rng = np.random.default_rng(0)
    sft = rng.uniform(0, 0.7, size=(3, 50)) + np.array([[0.0], [0.2], [-0.1]])
    draws = crossed_bootstrap_means([sft, sft + 0.2], n_boot=500, seed=1)
    np.testing.assert_allclose(draws[:, 1] - draws[:, 0], 0.2)


def test_crossed_bootstrap_refuses_models_on_different_problems():
    with pytest.raises(ValueError, match="same chains and held-out problems"):
        crossed_bootstrap_means([np.zeros((2, 3)), np.zeros((2, 4))])


def test_chain_verdicts_need_both_the_bootstrap_and_the_t_over_chains():
    assert chain_verdict(0.01, 0.01) == "exceeds"
    assert chain_verdict(0.01, 0.2) == "unresolved"
    assert chain_verdict(0.2, 0.01) == "within"


def test_paired_t_over_chains_is_scipys_on_the_chain_means():
    from scipy import stats

    a, b = [0.5, 0.52, 0.61], [0.3, 0.33, 0.31]
    assert paired_chain_t(a, b) == pytest.approx(stats.ttest_rel(a, b).pvalue)
    with pytest.raises(ValueError, match="at least 2 chains"):
        paired_chain_t([0.5], [0.3])


def test_differences_that_do_not_vary_are_judged_by_their_mean_not_their_first_value():
    """[1e-9, -1e-9, 0] is no difference (p = 1), not a constant non-zero one (p = 0)."""
    assert paired_chain_t([1e-9, -1e-9, 0.0], [0.0, 0.0, 0.0]) == 1.0
    assert paired_chain_t([0.3, 0.3, 0.3], [0.1, 0.1, 0.1]) == 0.0
    assert 0 < paired_chain_t([0.3, 0.31, 0.29], [0.1, 0.1, 0.1]) < 0.01


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
    in two chains and loses 0.25 in the third (not resolved, family against SFT); the previous rule is kept beside."""
    study = chain_study(_three_chains(), n_boot=2000, seed=0)
    pairs = {(t["a"], t["b"]): t for t in study["pairs"]["pass@1"]}
    primary, flips = pairs[("grpo", "sft")], pairs[("flips", "sft")]
    assert primary["verdict"] == "higher" and primary["family"] == "primary" and primary["p_holm"] == primary["p_value"]
    assert flips["verdict"] == "not_resolved" and flips["family"] == "vs_sft"
    assert pairs[("flips", "grpo")]["family"] == "methods" and pairs[("flips", "grpo")]["gate"] == "vs_sft"
    assert pairs[("flips", "grpo")]["verdict"] == "not_tested"  # flips - sft did not reject: the gate is closed
    assert primary["previous"]["verdict"] in ("exceeds", "unresolved") and "previous_rule" in study
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
    draws = crossed_bootstrap_means(list(matrices.values()), n_boot=50)
    old = previous_rule(matrices, draws, "pass@1")
    assert [(t["a"], t["b"]) for t in old] == [("grpo", "sft"), ("rloo", "sft"), ("rloo", "grpo")]
    assert all(t["p_value"] > 0 for t in old)  # (1 + count) / (B + 1)
