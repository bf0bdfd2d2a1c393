"""The seed study: run ids (which runs `snakemake seeds` trains), and its statistics against exact references."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from configs import config_of
from thai_grpo.core.config import ConfigError
from thai_grpo.core.seeds import chain_sampling_seed, parse_run, run_id, run_pattern, sampling_seed
from thai_grpo.workflow import checked_config, deep_merge, run_eval_settings, seed_runs
from thai_grpo_studies.study_words import with_sentences
from thai_grpo_studies.seed_stats import between_seed_interval, resampling_sd, seed_costs, seed_study

VARIANTS = {"grpo": {"group": "method"}, "dr_grpo": {"grpo": {"loss_type": "dr_grpo"}},
            "rloo": {"group": "method", "method": "rloo"}, "dpo": {"group": "method", "method": "dpo"},
            "ppo": {"group": "method", "method": "ppo"}, "g2": {"group": "pitfall"}, "temp0.3": {"group": "pitfall"}}


def config(seeds=(42, 1, 2), variants=VARIANTS):
    return {"seed": 42, "variants": variants, "seeds": {"training": list(seeds)}}


# --------------------------------------------------------------------------- run ids
def test_the_study_retrains_every_rl_method_row_and_nothing_else():
    # ppo stands for a method added later: any method that samples its own rollouts joins (DPO and pitfalls do not)
    assert list(seed_runs(config())) == ["grpo", "dr_grpo", "rloo", "ppo"]


def test_the_default_seed_is_the_existing_run_and_other_seeds_are_new_runs():
    runs = seed_runs(config(seeds=[1, 42, 2]))
    assert runs["grpo"] == ["grpo-seed1", "grpo", "grpo-seed2"]
    assert runs["rloo"] == ["rloo-seed1", "rloo", "rloo-seed2"]
    assert seed_runs({"seed": 42, "variants": VARIANTS})["grpo"] == ["grpo"]  # no seeds section: no study


@pytest.mark.parametrize("run, expected", [("grpo", ("grpo", 42)), ("grpo-seed7", ("grpo", 7)),
                                          ("dr_grpo-seed0", ("dr_grpo", 0)), ("temp0.3", ("temp0.3", 42)),
                                          ("temp0.3-seed12", ("temp0.3", 12))])
def test_run_ids_round_trip(run, expected):
    assert parse_run(run, VARIANTS, 42) == expected
    assert run_id(*expected, 42) == run


def test_each_seed_run_samples_with_its_own_seed_and_the_main_run_keeps_eval_seed():
    """Runs sampled with one seed share their random numbers (similar models draw mostly the same completions), so
    every seed-study run gets its own sampling seed; the default seed's run and base/sft keep eval.seed unchanged."""
    settings = {"seed": 1234, "temperature": 1.0, "num_samples": 8}
    seeds = {run: run_eval_settings(settings, run, list(VARIANTS), 42)["seed"]
             for run in ("base", "sft", "grpo", "grpo-seed1", "grpo-seed2", "rloo-seed1")}
    assert seeds["base"] == seeds["sft"] == seeds["grpo"] == 1234
    assert run_eval_settings(settings, "grpo", list(VARIANTS), 42) is settings  # the main run's params: identical
    assert len({seeds["grpo"], seeds["grpo-seed1"], seeds["grpo-seed2"]}) == 3
    assert seeds["grpo-seed1"] == seeds["rloo-seed1"] == sampling_seed(1234, 1, 42) == 1193
    assert run_eval_settings(settings, "grpo-seed1", list(VARIANTS), 42)["temperature"] == 1.0  # only the seed moves
    assert sampling_seed(0, 1, 42) == 2**32 - 41  # numpy's seed range: never negative


def test_each_chain_samples_with_its_own_seed_and_the_main_chain_keeps_eval_seed():
    """Every chain's held-out completions get their own random numbers; the config's own chain keeps eval.seed (the
    main run's numbers do not change), and no chain shares a seed-study run's sampling seed."""
    assert chain_sampling_seed(1234, 42, 42) == 1234
    chains = [chain_sampling_seed(1234, s, 42) for s in (42, 1, 2, 3, 4, 7)]
    assert len(set(chains)) == len(chains) and all(0 <= s < 2**32 for s in chains)
    seed_study_runs = {sampling_seed(1234, t, 42) for t in range(-1000, 1000)}
    assert not seed_study_runs & set(chains[1:])


def test_a_run_of_no_variant_is_refused():
    for run in ("nope", "nope-seed1", "grpo-seed", "grpo-seedx"):
        with pytest.raises(ValueError, match="names no variant"):
            parse_run(run, VARIANTS, 42)


def test_the_wildcard_constraint_matches_run_ids_only():
    import re

    pattern = re.compile(run_pattern(VARIANTS) + "$")
    assert all(pattern.match(r) for r in ("grpo", "grpo-seed1", "temp0.3-seed2", "dpo"))
    assert not any(pattern.match(r) for r in ("grpoX", "grpo-seed", "grpo-seed1-seed2", "temp0x3"))


def test_names_that_read_as_seeded_runs_and_repeated_seeds_are_refused():
    shipped = config_of()
    checked_config(deep_merge(shipped, {"variants": {"grpo-seedling": {}}, "seeds": {"training": [42, 1]}}))
    with pytest.raises(ConfigError, match=r"^variants.grpo-seed3: a name ending in '-seed<digits>' reads as a seeded "
                                          r"run of another variant; rename it$"):
        checked_config(deep_merge(shipped, {"variants": {"grpo-seed3": {}}}))
    with pytest.raises(ConfigError, match=r"^seeds.training=\[42, 1, 1\]: \[42, 1, 1\] has non-unique elements"):
        checked_config(deep_merge(shipped, {"seeds": {"training": [42, 1, 1]}}))


def test_seed_costs_count_the_added_runs_only():
    seconds = {"train-grpo": 100.0, "train-grpo-seed1": 120.0, "sample-grpo-seed1": 30.0, "score-grpo-seed1": 1.0,
               "sample-grpo": 29.0, "results": 2.0}
    cost = seed_costs(seconds, ["grpo", "grpo-seed1"], ["grpo", "grpo"])
    assert cost["runs_added"] == ["grpo-seed1"]
    assert cost["per_kind"] == {"train": 120.0, "sample": 30.0, "score": 1.0} and cost["sum_seconds"] == 151.0


# --------------------------------------------------------------------------- statistics
def test_between_seed_interval_is_scipys_t_interval():
    values = [0.61, 0.65, 0.58]
    got = between_seed_interval(values)
    low, high = stats.t.interval(0.95, df=2, loc=np.mean(values), scale=stats.sem(values))
    assert got["t_low"] == pytest.approx(low) and got["t_high"] == pytest.approx(high)
    assert got["sd"] == pytest.approx(np.std(values, ddof=1)) and got["seeds"] == 3
    with pytest.raises(ValueError, match="at least 2 seeds"):
        between_seed_interval([0.5])


def test_resampling_sd_is_unbiased_for_the_variance_of_pass1():
    # every outcome of n = 3 samples on each of P = 2 problems, weighted by its binomial probability
    p, n = np.array([0.2, 0.7]), 3
    expected_sq = 0.0
    for counts in itertools.product(range(n + 1), repeat=p.size):
        weight = np.prod([stats.binom.pmf(c, n, q) for c, q in zip(counts, p)])
        expected_sq += weight * resampling_sd(counts, n) ** 2
    assert expected_sq == pytest.approx(np.sum(p * (1 - p) / n) / p.size ** 2)


def test_every_method_is_compared_with_grpo_paired_by_seed():
    """A method 40 points above grpo at every seed is higher; one that only moves with its seed is not resolved."""
    rng = np.random.default_rng(1)

    def study_runs(level, spread):
        return [{"run": f"r{s}", "seed": s, "scores": {"per_problem_correct": list(counts), "n_samples": 8,
                                                        "num_problems": 60, "pass@1": {"estimate": counts.mean() / 8,
                                                                                       "bootstrap_low": 0,
                                                                                       "bootstrap_high": 1}}}
                for s, counts in zip((42, 1, 2), (rng.binomial(8, np.clip(level + spread * rng.normal()
                                                                        + rng.uniform(-0.2, 0.2, 60), 0, 1))
                                                  for _ in range(3)))]

    runs = {"grpo": study_runs(0.3, 0.01), "high": study_runs(0.7, 0.01), "noisy": study_runs(0.32, 0.1)}
    study = seed_study(runs)
    tests = {t["a"]: t for t in study["pairs"]}
    assert tests["high"]["verdict"] == "higher" and tests["noisy"]["verdict"] in ("not_resolved", "equivalent")
    assert {t["b"] for t in study["pairs"]} == {"grpo"} and tests["high"]["family"] == "many_to_one"
    assert tests["high"]["correction"] == "Dunnett over 2 contrasts" and "previous" not in tests["high"]
    assert study["power"]["contrasts"] == 2 and study["power"]["seeds"] == 3


def test_the_seed_lists_must_match_not_only_their_counts():
    runs = {"grpo": [{"run": "grpo", "seed": 42, "scores": {}}, {"run": "grpo-seed1", "seed": 1, "scores": {}}],
            "rloo": [{"run": "rloo", "seed": 42, "scores": {}}, {"run": "rloo-seed2", "seed": 2, "scores": {}}]}
    with pytest.raises(ValueError, match=r"rloo: runs at seeds \[42, 2\], grpo at \[42, 1\]"):
        seed_study(runs)


def test_seed_study_assembles_each_method_from_its_runs():
    def scores(counts, n=4):
        return {"per_problem_correct": counts, "n_samples": n, "num_problems": len(counts),
                "pass@1": {"estimate": sum(counts) / (n * len(counts)), "bootstrap_low": 0.1, "bootstrap_high": 0.3}}

    runs = {"grpo": [{"run": "grpo", "seed": 42, "scores": scores([4, 2, 0])},
                     {"run": "grpo-seed1", "seed": 1, "scores": scores([3, 1, 0])}],
            "rloo": [{"run": "rloo", "seed": 42, "scores": scores([1, 1, 0])},
                     {"run": "rloo-seed1", "seed": 1, "scores": scores([2, 1, 0])}]}
    study = seed_study(runs)
    grpo = study["methods"]["grpo"]
    assert [r["seed"] for r in grpo["runs"]] == [42, 1]
    assert grpo["between_seed"]["mean"] == pytest.approx((6 / 12 + 4 / 12) / 2)
    # the within-run SE is a standard deviation (sd over problems / sqrt(P)), beside the other SDs; RMS over seeds
    by_hand = [np.std([1, 0.5, 0], ddof=1) / np.sqrt(3), np.std([0.75, 0.25, 0], ddof=1) / np.sqrt(3)]
    assert [r["within_run_se"] for r in grpo["runs"]] == pytest.approx(by_hand)
    assert grpo["within_run_se"] == pytest.approx(np.sqrt(np.mean(np.square(by_hand))))
    assert [(t["a"], t["b"]) for t in study["pairs"]] == [("rloo", "grpo")]
    assert study["pairs"][0]["mean_diff"] == pytest.approx(5 / 24 - 10 / 24)
    assert grpo["crossed"]["low"] < grpo["between_seed"]["mean"] < grpo["crossed"]["high"]


# --------------------------------------------------------------------------- the report
def _fixture_study():
    rng = np.random.default_rng(3)

    def scores(level):
        counts = rng.binomial(8, level, size=16).tolist()
        return {"per_problem_correct": counts, "n_samples": 8, "num_problems": 16,
                "pass@1": {"estimate": sum(counts) / 128, "bootstrap_low": 0.2, "bootstrap_high": 0.5}}

    runs = {m: [{"run": run_id(m, s, 42), "seed": s, "scores": scores(level)} for s in (42, 1, 2)]
            for m, level in (("grpo", 0.6), ("rloo", 0.2))}
    study = seed_study(runs)
    return {"training_seeds": [42, 1, 2], "default_seed": 42, "eval_seed": 1234, "num_problems": 16, "n_samples": 8,
            **study, "pairs": with_sentences(study["pairs"]),
            "cost": {"runs_added": ["grpo-seed1"], "per_kind": {"train": 60.0, "sample": 6.0, "score": 1.0},
                     "sum_seconds": 67.0}}


def test_the_comparison_says_one_seed_and_shows_the_study_beside_each_row_once_built():
    from workflow import load_report_fixture

    from thai_grpo.report.html import render_report
    from thai_grpo.report.plan_words import VERDICT_WORDS

    results, samples = load_report_fixture()
    without = render_report(results, samples, {}).split('<section id="comparison" class="part">')[1].split("</section>")[0]
    assert "One training seed per method" in without and "<code>snakemake --cores 2 seeds</code>" in without
    results["seed_study"] = study = _fixture_study()
    comparison = render_report(results, samples, {}).split('<section id="comparison" class="part">')[1].split("</section>")[0]
    assert "Seed study (3 training seeds)" in comparison and "One training seed per method" in comparison
    table = comparison.split('class="numbers methods seed-summary"')[1].split("</table>")[0]
    grpo_row = table.split("<th>GRPO</th>")[1].split("</tr>")[0]
    assert f"vs rloo: {VERDICT_WORDS[study['pairs'][0]['verdict']]}" in grpo_row
    assert "not retrained (only RL methods are)" in table.split("<th>SFT</th>")[1].split("</tr>")[0]
    assert "Training-seed variance" in comparison and "seed 2:" in comparison


def test_a_contrast_sentence_names_its_family_and_its_verdict():
    from thai_grpo_studies.study_words import seed_pair_verdict

    test = {"a": "rloo", "b": "grpo", "mean_diff": -0.396, "ci_low": -0.477, "ci_high": -0.324, "p_value": 0.0004,
            "p_holm": 0.0011, "verdict": "lower", "family": "many_to_one", "correction": "Dunnett over 3 contrasts",
            "alpha": 0.05, "seeds": 3}
    assert seed_pair_verdict(test, "RLOO", "GRPO") == (
        "RLOO - GRPO: -39.6 points over 3 seeds (pooled, seed as block: simultaneous 95% interval [-47.7, -32.4] "
        "points, p = 0.00040, adjusted p = 0.0011; against the baseline grpo, Dunnett over 3 contrasts at 5%): "
        "RLOO lower than GRPO.")
