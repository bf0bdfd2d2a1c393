"""The time plan's arithmetic (thai_grpo_tools.time_plan): each stage's work counted from the real config, the T4
costs fitted to the chapter's two figures, the H100-class costs derived from them, a gpu-check measurement in their
place, and the goals' verdicts computed from the totals."""

from __future__ import annotations

import math

import pytest
from workflow import REPO

from thai_grpo_tools.stage_plans import real_config
from thai_grpo_tools import time_plan as tp

REAL = real_config(REPO)


def test_grpo_full_generates_the_chapters_budget_in_one_call_per_step():
    work = tp.grpo_work("full", REAL["grpo"], 128)
    assert (work.optimizer_steps, work.decode_steps, work.generated_tokens) == (16, 16 * 256, 128 * 8 * 256)
    assert work.units == 5 * work.generated_tokens


def test_sampling_counts_every_call_to_its_last_step():
    from thai_grpo.jobs.memory_stages import greedy_problems_per_call
    from thai_grpo_tools.stage_plans import QWEN3_0_6B

    work = tp.sampling_work("s", problems=10, num_samples=3, length=7, batch=4, jobs=2)
    greedy = greedy_problems_per_call(QWEN3_0_6B, 4, 3, 7)  # as many as fit in a sampling call's memory
    assert 4 <= greedy < 12  # more than a sampling call's problems, fewer than its sequences: each holds its prompt
    calls = math.ceil(10 / 4) + math.ceil(10 / greedy)  # sampled, then greedy
    assert work.decode_steps == 2 * calls * 7 and work.generated_tokens == 2 * (10 * 3 + 10) * 7 == work.units


def test_ppo_decode_steps_follow_the_rows_per_generate_call():
    settings = {"max_steps": 16, "batch_size": 64, "num_ppo_epochs": 4, "num_mini_batches": 8}
    assert tp.ppo_work("p", settings, 256, 64).decode_steps == 16 * 256
    assert tp.ppo_work("p", settings, 256, 18).decode_steps == 16 * 4 * 256
    assert tp.ppo_work("p", settings, 256, 64).units == 16 * 64 * 256 * (1 + 4 + 4 * 6)


def test_the_t4_fit_gives_back_both_of_the_chapters_figures_and_the_h100_costs_less():
    t4 = tp.t4_costs(REAL)
    fast = {**REAL["grpo"], **REAL["variants"]["grpo_fast"]["grpo"]}
    for args, minutes in ((REAL["grpo"], 18), (fast, 10)):
        assert tp.seconds(tp.grpo_work("", args, 128), t4) == pytest.approx(minutes * 60)
    assert t4.step_s > 0 and t4.unit_s > 0
    h100 = tp.h100_costs(t4)
    assert h100.unit_s == pytest.approx(t4.unit_s * 320 / 3350) and h100.step_s == pytest.approx(t4.step_s / 4)


def test_a_gpu_check_measurement_replaces_the_prediction_on_its_card():
    record = {"machine": "NVIDIA H100 80GB HBM3", "stages": [{"stage": "grpo", "seconds_per_step": 10.0},
                                                             {"stage": "ppo", "seconds_per_step": 100.0}]}
    predicted = tp.predictions(REAL)
    measured = tp.predictions(REAL, record)
    row = next(r for r in measured["H100-class"]["rows"] if r["work"].stage == "train grpo")
    assert row["measured"] and row["seconds"] == 10.0 * 16 + tp.JOB_START_S
    # the check's PPO step is one rollout batch with its 4 epochs x 8 minibatches: 16 of them, not 512 updates
    ppo = next(r for r in measured["H100-class"]["rows"] if r["work"].stage == "train ppo")
    assert ppo["work"].optimizer_steps == 16 * 4 * 8 and ppo["seconds"] == 100.0 * 16 + tp.JOB_START_S
    assert measured["T4"]["rows"] == predicted["T4"]["rows"]  # another card's measurement changes nothing there
    assert "(measured)" in tp.markdown_table(REAL, record)


def test_the_goals_are_verdicts_of_the_totals():
    for card, result in tp.predictions(REAL).items():
        without_passk = sum(r["seconds"] for r in result["rows"] if not r["work"].stage.startswith("pass@k"))
        assert result["total_s"] == pytest.approx(without_passk)
        assert result["meets_time_goal"] == (without_passk <= tp.GOALS[card])
    assert tp.predictions(REAL)["H100-class"]["ppo_decode_ratio"] <= tp.PPO_DECODE_GOAL


def test_the_pipeline_never_imports_the_time_plan():
    users = [path for path in [*REPO.glob("scripts/*.py"), *REPO.glob("thai_grpo/**/*.py"), *REPO.glob("rules/*.smk")]
             if "time_plan" in path.read_text(encoding="utf-8")]
    assert users == []  # make docs reaches it through thai_grpo_tools.reference_tables
