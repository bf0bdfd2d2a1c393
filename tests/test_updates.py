"""Every optimizer update counted (thai_grpo.methods.updates): a float16 step on the CPU whose gradients overflow is
skipped by the loss scaler and counted, in a TRL trainer (GRPO, with a T4's float16 autocast and loss scaler on the
CPU) and in PPO (its own GradScaler); without a scaler (bfloat16) the non-finite gradient is counted instead; a stage
whose lost updates exceed training.max_lost_update_share stops with one line, keeping its checkpoints."""

from __future__ import annotations

import json

import pytest
import torch
from run_specs import TRAINING, plan, run_spec

import thai_grpo.models.loading as loading
from thai_grpo.data.problems import normalize_rows
from thai_grpo.methods.updates import (LostUpdates, check_lost_updates, lost_updates, scaler_skipped, update_counts,
                                       update_record)

GRPO = {"num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 6, "max_steps": 3,
        "learning_rate": 1e-3, "beta": 0.04, "loss_type": "grpo", "scale_rewards": "group", "save_steps": 1}
PPO = {"max_steps": 3, "batch_size": 4, "num_ppo_epochs": 1, "save_steps": 1}


def test_counts_and_lost_updates_of_per_step_records():
    # step 1 skipped by the scaler (its gradients overflowed), step 3 non-finite but applied (no scaler: bfloat16)
    records = [update_record(1, True, False), update_record(2, False, True), update_record(3, False, False),
               update_record(4, False, True)]
    assert update_counts(records) == {"optimizer_steps_skipped": 1, "nonfinite_grad_steps": 2}
    assert lost_updates(records) == 2
    check_lost_updates("grpo", records, total_steps=4, max_share=0.5)  # 2 of 4: allowed
    with pytest.raises(LostUpdates, match=r"^grpo: 2 of 4 optimizer updates lost by step 4 \(1 skipped .* 2 with "
                                          r"non-finite gradients\).*max_lost_update_share=0.25"):
        check_lost_updates("grpo", records, total_steps=4, max_share=0.25)
    assert issubclass(LostUpdates, SystemExit)  # the job ends with its one line, no traceback


def test_a_cpu_grad_scaler_skips_an_overflowing_step_and_says_so():
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    for gradient, expected in ((torch.full((3,), float("inf")), True), (torch.ones(3), False)):
        optimizer.zero_grad()
        scaler.scale((weight * gradient).sum()).backward()  # d/dw = gradient, times the scale
        before = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        assert scaler_skipped(before, scaler) is expected
    assert torch.allclose(weight.detach(), torch.full((3,), 0.9))  # only the finite step moved it
    assert not scaler_skipped(1.0, torch.amp.GradScaler("cpu", enabled=False))


@pytest.fixture
def overflow_once(monkeypatch):
    """Every trainable policy loaded from now on gets an infinite gradient in its first backward pass, then the true
    ones: one optimizer step's gradients overflow."""
    load_policy = loading.load_policy

    def load_with_overflow(*args, trainable=False, **kwargs):
        model = load_policy(*args, trainable=trainable, **kwargs)
        if trainable:
            parameter = next(p for n, p in model.named_parameters() if p.requires_grad and "lora_B" in n)
            calls = []
            parameter.register_hook(lambda grad: calls.append(1) or (grad * float("inf") if len(calls) == 1 else grad))
        return model

    monkeypatch.setattr(loading, "load_policy", load_with_overflow)


def _rows(synthetic_rows, count=4):
    return normalize_rows(synthetic_rows[:count], "translated_question", "translated_answer")[0]


def test_a_float16_grpo_step_that_overflows_is_skipped_and_counted(tiny_model_dir, tiny_adapter_dir, synthetic_rows,
                                                                   tmp_path, overflow_once):
    import thai_grpo.methods.grpo as grpo

    spec = run_spec(tmp_path, "grpo", tiny_model_dir, tiny_adapter_dir, plan("grpo", GRPO), _rows(synthetic_rows),
                    dtype="float16", training={**TRAINING, "max_lost_update_share": 0.5}, rollouts=tmp_path / "rollouts.jsonl")
    result = grpo.train(spec)
    assert result["resolved_args"]["fp16"]  # float16 autocast and the loss scaler, as on a T4
    assert (result["optimizer_steps_skipped"], result["nonfinite_grad_steps"]) == (1, 1)
    flags = [(s["step"], s["optimizer_step_skipped"], s["nonfinite_grad"]) for s in result["steps"]]
    assert flags == [(1, True, True), (2, False, False), (3, False, False)]
    rollouts = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rollouts] == [1] * 4 + [2] * 4 + [3] * 4
    assert {r["prompt_id"] for r in rollouts} <= {row["id"] for row in spec.train_rows}
    assert all(set(r["rewards"]) == {"correct", "format", "thai"} and "advantage" in r for r in rollouts)


def test_a_grpo_run_past_its_lost_update_share_stops_and_keeps_its_checkpoints(tiny_model_dir, tiny_adapter_dir,
                                                                             synthetic_rows, tmp_path, overflow_once):
    import thai_grpo.methods.grpo as grpo

    spec = run_spec(tmp_path, "grpo", tiny_model_dir, tiny_adapter_dir, plan("grpo", GRPO), _rows(synthetic_rows),
                    dtype="float16")
    with pytest.raises(LostUpdates, match=r"^grpo: 1 of 3 optimizer updates lost by step 1 \(1 skipped by the "
                                          r"float16 loss scaler"):
        grpo.train(spec)
    assert spec.checkpoint_dir.is_dir() and not spec.out_dir.exists()


@pytest.mark.parametrize("dtype, skipped", [("float16", 1), ("bfloat16", 0)])
def test_a_ppo_update_that_overflows_is_counted(tiny_model_dir, tiny_adapter_dir, synthetic_rows, tmp_path,
                                                overflow_once, dtype, skipped):
    """float16: PPO's GradScaler skips the update; bfloat16 has no scaler, so the non-finite gradient is applied (and
    ruins the weights: every later update is non-finite too), which the counts show."""
    import thai_grpo.methods.ppo as ppo

    spec = run_spec(tmp_path, "ppo", tiny_model_dir, tiny_adapter_dir,
                    plan("ppo", {"temperature": 1.0, "max_completion_length": 6}, ppo={**PPO, "score": "verifier"}),
                    _rows(synthetic_rows), dtype=dtype, training={**TRAINING, "max_lost_update_share": 1.0})
    result = ppo.train(spec)
    first = result["steps"][0]
    assert (first["optimizer_steps_skipped"], first["nonfinite_grad_steps"]) == (skipped, 1)
    assert result["optimizer_steps_skipped"] == skipped and result["nonfinite_grad_steps"] >= 1
    if dtype == "float16":
        assert [s["nonfinite_grad_steps"] for s in result["steps"]] == [1, 0, 0]  # skipped: the weights stay finite
