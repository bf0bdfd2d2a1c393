"""The report's lesson numbers (thai_grpo.report.lessons, rollouts.pitfall_numbers): each departure's why is computed
from the run, and says no when the run does."""

from __future__ import annotations

import itertools

import pytest

from thai_grpo.report import lessons
from thai_grpo.report.rollouts import pitfall_numbers, signal_share


def test_signal_share_counts_every_subset_of_a_group():
    """Against brute force: the share of a group's size-g subsets whose rewards differ."""
    group = [1.5, 0.5, 0.5, 1.5, 0.5, 0.5, 0.5, 0.3]
    for size in (2, 4, 8):
        subsets = list(itertools.combinations(group, size))
        assert signal_share(group, size) == pytest.approx(sum(len(set(s)) > 1 for s in subsets) / len(subsets))
    assert signal_share([0.5] * 8, 2) == 0.0


def test_pitfall_numbers_pay_what_each_regex_pays():
    rollouts = [{"completion": "<think>8 + 6 = 14</think> 14", "reward": 1.5},
                {"completion": "<think></think> 14", "reward": 1.2},  # the lenient regex's hack
                {"completion": "<think> </think> 3", "reward": 0.5},  # the strict regex's loophole
                {"completion": "14", "reward": 1.2}]
    numbers = pitfall_numbers(rollouts, 2)
    assert numbers["format_paid"] == {"strict": 2, "lenient": 3} and numbers["hollow_paid"] == 1
    assert numbers["signal_by_group_size"] == {"2": 1.0} and numbers["groups"] == 2


def test_unanimity_names_the_near_unanimous_group():
    shape = lessons.unanimity([0.5, 0.5, 0.5, 1.5, 0.5, 0.5, 0.5, 0.5])
    assert shape == {"reward": 0.5, "count": 7, "size": 8, "near_unanimous": True, "lone": 3}
    assert not lessons.unanimity([0.5, 1.5, 0.5, 1.5])["near_unanimous"]


def _run(**grpo) -> dict:
    return {"config": {"grpo": {"max_completion_length": 80, **grpo}},
            "run": {"chapter_departures": [{"key": "grpo.learning_rate", "chapter": 1e-6, "value": 1e-3},
                                           {"key": "grpo.max_completion_length", "chapter": 256, "value": 80}]},
            "eval": {"sft": {"mean_completion_length": 39.0}},
            "train": {"steps": [{"completion_length_mean": 40.0, "clipped_ratio": 0.0, "clip_ratio": 0.0,
                                 "kl": 0.01 * i} for i in range(9)]}}


def test_length_lesson_says_why_only_when_the_length_does_not_grow():
    results = _run()
    ll = lessons.length_lesson(results)
    assert not ll["grows"] and (ll["budget"], ll["chapter_budget"], ll["sft_length"]) == (80, 256, 39.0)
    for step in results["train"]["steps"][6:]:
        step["completion_length_mean"] = 60.0
    assert lessons.length_lesson(results)["grows"]


def test_clip_lesson_is_on_policy_only_when_every_step_clipped_nothing():
    results = _run(epsilon=0.2)
    assert lessons.clip_lesson(results) == {"steps": 9, "never": True, "mean": 0.0, "num_iterations": 1,
                                            "epsilon": 0.2}
    results["train"]["steps"][4]["clip_ratio"] = 0.05
    assert not lessons.clip_lesson(results)["never"]


def test_kl_lesson_reads_the_learning_rate_departure_and_the_trained_kl():
    results = _run()
    results["kl_real"] = {"summary": {"means": {"exact": {"mean": 0.1}}, "share_k3_lower_variance": 0.78},
                          "logp_policy": [-1.0, -2.0], "logp_ref": [-1.5, -1.0]}
    taken = {"better": "k1", "ratio": 5.0, "agrees": False}
    kn = lessons.kl_lesson(results, taken)
    assert kn["lr"]["factor"] == pytest.approx(1000) and kn["train_kl"] == pytest.approx(0.07)
    assert kn["share_k3"] == 0.78 and kn["k1_negative"] == 0.5  # log(pi/pi_ref): 0.5 and -1.0
    results["run"]["chapter_departures"] = []  # the chapter's own learning rate: no departure to explain it by
    assert lessons.kl_lesson(results, taken)["lr"] is None
    assert lessons.kl_lesson(results, None) is None


def test_cost_lesson_says_the_runtime_dominates_only_when_the_model_is_small():
    methods = [{"model": "sft", "method": "SFT", "train_seconds": 0.1, "peak_memory_mb": 8.0},
               {"model": "grpo", "method": "GRPO", "peak_memory_mb": 1304.0}]
    results = {"run": {"model": {"base_parameters": 1_115_776}}, "config": {"sft": {"source": "shipped"}}}
    co = lessons.cost_lesson(results, methods)
    assert co["runtime_dominates"] and co["sft_shipped"] and co["model_mb"] == pytest.approx(4.46, abs=0.01)
    results["run"]["model"]["base_parameters"] = 596_049_920  # Qwen3-0.6B: 2.4 GB of float32 against 1.3 GB
    assert not lessons.cost_lesson(results, methods)["runtime_dominates"]
