"""The chain study's statistics (thai_grpo.evaluation.chain_stats) against exact enumeration and hand-made chains."""

from itertools import product

import numpy as np
import pytest

from thai_grpo.evaluation.chain_stats import (chain_pairwise_tests, chain_study, chain_verdict,
                                              crossed_bootstrap_means, paired_chain_t)


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


def _scores(correct, n=8):
    correct = np.asarray(correct)
    rate = float(correct.sum() / (n * correct.size))
    return {"per_problem_correct": correct.tolist(), "n_samples": n, "per_problem_greedy": (correct > n / 2).astype(int).tolist(),
            "pass@1": {"estimate": rate, "bootstrap_low": rate - 0.05, "bootstrap_high": rate + 0.05}}


def test_a_steady_gain_exceeds_the_noise_and_a_gain_that_flips_with_the_chain_does_not():
    """Three chains of 200 problems: `steady` gains ~+0.3 in each, `flips` gains +0.15 in two chains and loses 0.25
    in the third (mean ~+0.02): the first exceeds both noises, the second does not; Holm's family is named."""
    rng = np.random.default_rng(7)
    p = rng.uniform(0.1, 0.5, size=200)
    runs = {"sft": [], "steady": [], "flips": []}
    for chain, shift in zip((42, 1, 2), (0.15, 0.15, -0.25)):
        base = np.clip(p + rng.normal(0, 0.05), 0, 1)
        runs["sft"].append({"seed": chain, "scores": _scores(rng.binomial(8, base))})
        runs["steady"].append({"seed": chain, "scores": _scores(rng.binomial(8, np.clip(base + 0.3, 0, 1)))})
        runs["flips"].append({"seed": chain, "scores": _scores(rng.binomial(8, np.clip(base + shift, 0, 1)))})
    study = chain_study(runs, n_boot=4000, seed=0)
    pairs = {(t["a"], t["b"]): t for t in study["pairs"]["pass@1"]}
    assert pairs[("steady", "sft")]["verdict"] == "exceeds"
    assert pairs[("flips", "sft")]["verdict"] in ("within", "unresolved")
    assert pairs[("flips", "sft")]["family"] == "Holm over the 3 pairs of pass@1"
    steady = study["models"]["steady"]
    per_chain = [row["gain_over_sft"]["estimate"] for row in steady["chains"]]
    assert steady["gain_over_sft"]["mean"] == pytest.approx(np.mean(per_chain))
    assert all(row["gain_over_sft"]["low"] < row["gain_over_sft"]["estimate"] < row["gain_over_sft"]["high"]
               for row in steady["chains"])
    assert study["seeds"] == [42, 1, 2] and "gain_over_sft" not in study["models"]["sft"]


def test_chain_study_refuses_chains_out_of_step_with_sft():
    runs = {"sft": [{"seed": 42, "scores": _scores([1, 2])}, {"seed": 1, "scores": _scores([1, 2])}],
            "grpo": [{"seed": 1, "scores": _scores([1, 2])}, {"seed": 42, "scores": _scores([1, 2])}]}
    with pytest.raises(ValueError, match="differ from SFT"):
        chain_study(runs, n_boot=10)


def test_pairwise_tests_cover_every_pair_once():
    matrices = {m: np.full((2, 4), v) for m, v in (("sft", 0.2), ("grpo", 0.5), ("rloo", 0.4))}
    draws = crossed_bootstrap_means(list(matrices.values()), n_boot=50)
    tests = chain_pairwise_tests(matrices, draws, "pass@1")
    assert [(t["a"], t["b"]) for t in tests] == [("grpo", "sft"), ("rloo", "sft"), ("rloo", "grpo")]
