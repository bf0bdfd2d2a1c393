"""The time plan (thai_grpo_tools.time_plan): each stage's work counted from the config as its code runs it, the
calibration on the `make gpu-check` records and the chapter's T4 times, the generated tables' shape, the goals'
verdicts computed from the totals, and docs/real-run.md's blocks as `make docs` renders them."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import pytest
from workflow import REPO

from thai_grpo.jobs.memory_stages import CARD_GIB, PROMPT_TOKENS, ppo_chunk_floats_for_card
from thai_grpo_tools import time_model as tm
from thai_grpo_tools import time_plan as tp
from thai_grpo_tools.reference import table_blocks
from thai_grpo_tools.memory_plan import QWEN3_0_6B, real_config, sft_shape

REAL = real_config(REPO)
RECORDS = [json.loads(path.read_text(encoding="utf-8"))
           for path in sorted((REPO / "docs" / "reference").glob("gpu_check*.json"))]


@pytest.fixture(scope="module")
def checked() -> dict:
    return tp.calibration(RECORDS, REAL, QWEN3_0_6B, PROMPT_TOKENS)


@pytest.fixture(scope="module")
def planned(checked) -> dict:
    return tp.plan(REAL, checked["costs"], QWEN3_0_6B, PROMPT_TOKENS)


def test_grpo_full_decodes_the_chapters_budget_in_one_call_per_step():
    job = tp.grpo_job(QWEN3_0_6B, REAL["grpo"], 128, PROMPT_TOKENS)
    assert (job.decode_steps, job.trainer_runs, job.fused_head_compiles, job.jobs) == (16 * 256, 1, 1, 1)
    step = tp.grpo_step(QWEN3_0_6B, "16-bit", REAL["grpo"], PROMPT_TOKENS)
    rollouts = tm.generate_call(QWEN3_0_6B, "16-bit", tm.TRL_GENERATE, 8, 8, PROMPT_TOKENS, [256] * 64, "decode_lora")
    assert step.ops == rollouts.ops + 4 * tm.HOST_OPS["forward"]  # the rollouts, then 4 references (beta 0.04)
    assert step.train_ops == 4 * tm.HOST_OPS["train_lora_checkpointed"]


def test_rloo_adds_its_old_log_probs_to_grpos_step():
    args, width = REAL["grpo"], PROMPT_TOKENS + 256
    grpo, rloo = (tp.grpo_step(QWEN3_0_6B, "16-bit", args, PROMPT_TOKENS, method) for method in ("grpo", "rloo"))
    old = tm.forward_pass(QWEN3_0_6B, "16-bit", 16, width, 256, "forward_lora")
    assert rloo.ops - grpo.ops == 4 * old.ops and rloo.bytes - grpo.bytes == pytest.approx(4 * old.bytes)


def test_ppo_decodes_one_call_per_chunk_of_prompts():
    settings = {"batch_size": 64, "num_ppo_epochs": 4, "num_mini_batches": 8}
    for generate, calls in ((64, 1), (25, 3)):
        step = tp.ppo_step(QWEN3_0_6B, settings, 118, 256, {"generate": generate, "logprobs": 9, "update": 1}, tm.HF_GENERATE)
        assert step.decode_steps == calls * 256
    # 4 epochs x 8 minibatches, each 8 chunks of one row through the policy and the value model
    assert step.train_ops == 4 * 8 * 8 * 2 * tm.HOST_OPS["train_lora"]


def test_a_records_sizes_are_the_ones_todays_code_chooses_for_a_t4():
    record = next(r for r in RECORDS if r["dtype"] == "float16")
    sizes = tp.record_sizes(record)
    assert (sizes["heldout_problems"], sizes["samples"]) == (11, 8)
    sft, value = sft_shape(REAL, None)
    settings = REAL["variants"]["ppo"]["ppo"]
    prompt = int(record["prompt_tokens"])
    floats = ppo_chunk_floats_for_card(QWEN3_0_6B, sft, value, settings, 256, CARD_GIB, prompt=prompt)
    # The record ran PPO at 2^29 floats per chunk; the plan has since counted the rollouts' log-prob pass on the
    # completion's positions only and the decode loop's phases one at a time (measured:
    # tests/test_memory_measured.py), and a T4 now takes chunks of 2^30: the record's PPO sizes are the code's at 2^29.
    assert floats == 2 ** 30
    chunks = tp.ppo_chunks(QWEN3_0_6B, {**settings, "chunk_floats": 2 ** 29}, prompt, 256, sft, value, CARD_GIB)
    assert sizes["ppo"] == {key: chunks[key] for key in ("generate", "logprobs", "update")} == \
        {"generate": 25, "logprobs": 9, "update": 1}
    assert not chunks["checkpointing"]  # a number: each pass within it, as the record's code did
    auto = tp.ppo_chunks(QWEN3_0_6B, settings, prompt, 256, sft, value, CARD_GIB)  # what a T4's job chooses now
    assert auto["update"] > chunks["update"] and auto["logprobs"] > chunks["logprobs"]


def test_every_timed_stage_is_predicted_with_its_error(checked):
    timed = [(s["stage"], s["seconds"]) for r in RECORDS for s in r["stages"] if s.get("seconds") is not None]
    rows = checked["rows"]
    assert [(row["stage"], row["measured_s"]) for row in rows[:len(timed)]] == timed
    assert [row["card"] for row in rows[len(timed):]] == [tm.T4, tm.T4]  # the chapter's two figures
    for row in rows:
        assert row["error"] == pytest.approx(row["predicted_s"] / row["measured_s"] - 1)
    assert checked["largest_error"] == max(abs(row["error"]) for row in rows)


def test_what_the_calibration_misses_is_the_warm_up_of_a_process(checked):
    """Within 25% except stages that ran first or second in their process; the chapter's T4 times reproduced."""
    missed = [row for row in checked["rows"] if abs(row["error"]) > tp.CHECKED_ERROR]
    assert all(row.get("position", 99) <= 2 for row in missed)
    assert all(abs(row["error"]) <= tp.CHECKED_ERROR for row in checked["rows"] if row["card"] == tm.T4)
    costs = checked["costs"]
    assert costs.memory >= 1 and costs.compute >= 1  # no pass beats its datasheet
    assert costs.launch_train[tm.T4.host] / costs.launch[tm.T4.host] == pytest.approx(
        costs.launch_train[tm.H200.host] / costs.launch[tm.H200.host])


def test_the_calibration_block_ends_with_its_largest_error(checked):
    table = tp.calibration_table(checked)
    last = table.splitlines()[-1]
    assert re.fullmatch(r"largest error \d+%", last)
    assert last == f"largest error {round(checked['largest_error'] * 100)}%"
    assert table.count("\n| ") == len(checked["rows"])  # one row per measured stage under the header
    verdict = "yes, the calibration is checked." if checked["largest_error"] <= tp.CHECKED_ERROR else "no, not checked"
    assert verdict in table


def test_the_plan_runs_the_decode_loop_and_trls_own_rollouts(planned):
    card = planned["H100-class"]
    stages = dict(tp.plan_stages(REAL, card["sizes"], tm.DECODE_LOOP, QWEN3_0_6B, PROMPT_TOKENS))
    assert {s["stage"]: s["work"] for s in card["stages"]} == stages
    recorded = dict(tp.plan_stages(REAL, card["sizes"], tm.HF_GENERATE, QWEN3_0_6B, PROMPT_TOKENS))
    assert stages["train grpo"] == recorded["train grpo"]  # GRPO's rollouts are TRL's whichever sampler
    assert stages["held-out sampling"].bytes < recorded["held-out sampling"].bytes  # the prompt's KV read once


def test_the_goals_are_verdicts_of_the_totals(planned):
    table = tp.plan_table(planned)
    for name, card in planned.items():
        without_passk = sum(s["seconds"] for s in card["stages"] if not s["stage"].startswith("pass@k"))
        assert card["total_s"] == pytest.approx(without_passk)
        if name in tp.GOALS_MIN:
            met = without_passk <= tp.GOALS_MIN[name] * 60
            assert f"within {tp.GOALS_MIN[name]} min: {'yes' if met else 'no'}" in table
            if not met:
                largest = max((s for s in card["stages"] if not s["stage"].startswith("pass@k")),
                              key=lambda s: s["seconds"])
                assert f"{largest['stage']} holds it" in tp.holding_stage(card)
    assert planned["H100-class"]["ppo_decode_ratio"] <= tp.PPO_DECODE_GOAL
    assert planned["T4"]["sizes"]["eval.batch_size"] < planned["H100-class"]["sizes"]["eval.batch_size"]
    assert table.count("| **the comparison (without pass@k)** |") == 1


def test_the_held_out_jobs_are_the_real_runs_sampling_jobs(planned):
    """13 jobs, each its calls of batch problems x (8 samples and the greedy answer, one more row), 256 steps each."""
    heldout = next(s for s in planned["H100-class"]["stages"] if s["stage"] == "held-out sampling")
    batch = planned["H100-class"]["sizes"]["eval.batch_size"]
    assert heldout["work"].jobs == 13 and heldout["work"].decode_steps == 13 * math.ceil(256 / batch) * 256
    one_call = tm.generate_call(QWEN3_0_6B, "float32", tm.DECODE_LOOP, batch, 9, PROMPT_TOKENS, [256] * batch * 9,
                                "decode")
    assert heldout["work"].ops == 13 * math.ceil(256 / batch) * one_call.ops  # no greedy call of its own


def test_cuda_graphs_leave_the_host_one_replay_and_the_draw_per_step(planned):
    """With eval.cuda_graphs, held-out sampling's steps cost 1 + ``outside_graph`` host operators instead of the
    loop's counted ones: the comparison is shorter on every card, by held-out sampling's host term at most."""
    for card in planned.values():
        heldout = next(s for s in card["stages"] if s["stage"] == "held-out sampling")
        assert card["total_s"] - heldout["terms"]["host"] < card["graphed_s"] < card["total_s"]


def test_the_documents_blocks_are_what_make_docs_renders():
    blocks = table_blocks((REPO / "docs" / "real-run.md").read_text(encoding="utf-8"))
    assert {name: blocks[name] for name in ("time-check", "time-plan")} == tp.tables(REAL, RECORDS)


def test_the_pipeline_never_imports_the_time_plan():
    users = [path for path in [*REPO.glob("scripts/*.py"), *REPO.glob("thai_grpo/**/*.py"), *REPO.glob("rules/*.smk")]
             if re.search(r"time_plan|time_model", path.read_text(encoding="utf-8"))]
    assert users == []  # make docs reaches them through thai_grpo_tools.reference


def test_make_gpu_check_takes_about_twelve_minutes_on_an_h100_by_the_plan(checked):
    """Its three passes on an 80 GB card (float16 every stage; the trainers in bfloat16; float16 within a T4's memory,
    where PPO's smaller chunks cost most) predicted by the fitted costs: about 12 minutes, the capped pass's PPO at the
    sizes a T4 chooses."""
    from thai_grpo_tools.rehearse_full import rehearsal_config

    passes = tp.gpu_check_seconds(REAL, checked["costs"], tm.H100, int(RECORDS[0]["prompt_tokens"]),
                                  ("float16", "bfloat16", "float16-t4"))
    minutes = sum(sum(stages.values()) for stages in passes.values()) / 60
    print({name: round(sum(stages.values()) / 60, 1) for name, stages in passes.items()}, f"{minutes:.1f} min")
    assert minutes <= 12.5
    assert "token_logprobs" not in passes["bfloat16"] and "decode_stops" in passes["float16-t4"]
    assert passes["float16-t4"]["ppo"] > passes["float16"]["ppo"]  # a T4's chunks: more calls for the same work
    config = rehearsal_config(REAL, "chapter", tm.H100.memory_gib)
    assert (tp.trainer_steps("grpo", config), tp.trainer_steps("rloo", config), tp.trainer_steps("ppo", config)) == \
        (3, 1, 1)  # the grpo variant's three steps counted, each one step's work
