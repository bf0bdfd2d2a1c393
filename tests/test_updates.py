"""Every optimizer update counted (thai_grpo.methods.recorder): a float16 step on the CPU whose gradients overflow is
skipped by the loss scaler, counted and redone at the lowered scale, in a TRL trainer (GRPO, with a T4's float16
autocast and loss scaler on the CPU) and in PPO (its own GradScaler), so the scale's calibration loses no update and
the adapter is the one a run started at the calibrated scale trains; without a scaler (bfloat16) the non-finite
gradient is counted instead; a stage whose lost updates exceed training.max_lost_update_share stops with one line,
keeping its checkpoints."""

from __future__ import annotations

import json

import pytest
import torch
from run_specs import TRAINING, plan, run_spec

import thai_grpo.models.loading as loading
from thai_grpo.data.problems import normalize_rows
from thai_grpo.methods.recorder import LostUpdates, check_lost_updates, lost_updates, update_counts, update_record
from thai_grpo.methods.step_replay import scaler_skipped

GRAD_SCALER = torch.amp.GradScaler  # torch's own, whatever a test patched in
GRPO = {"num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 6, "max_steps": 3,
        "learning_rate": 1e-3, "beta": 0.04, "loss_type": "grpo", "scale_rewards": "group", "save_steps": 1}
PPO = {"max_steps": 3, "batch_size": 4, "num_ppo_epochs": 1, "save_steps": 1}


def test_counts_and_lost_updates_of_per_step_records():
    # step 1 skipped by the scaler (its gradients overflowed), step 3 non-finite but applied (no scaler: bfloat16)
    records = [update_record(1, True, False), update_record(2, False, True), update_record(3, False, False),
               update_record(4, False, True)]
    assert update_counts(records) == {"optimizer_steps_skipped": 1, "nonfinite_grad_steps": 2, "scaler_redos": 0}
    assert update_counts([update_record(1, False, True, redos=3)])["scaler_redos"] == 3  # redone: counted, not lost
    assert lost_updates([update_record(1, False, True, redos=3)]) == 0
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


def overflowing(monkeypatch, backward_passes):
    """Every trainable policy loaded from now on gets an infinite gradient in its first ``backward_passes`` backward
    passes (all of them: None), then the true ones."""
    load_policy = loading.load_policy

    def load_with_overflow(*args, trainable=False, **kwargs):
        model = load_policy(*args, trainable=trainable, **kwargs)
        if trainable:
            parameter = next(p for n, p in model.named_parameters() if p.requires_grad and "lora_B" in n)
            calls = []
            parameter.register_hook(lambda grad: calls.append(1) or (
                grad * float("inf") if backward_passes is None or len(calls) <= backward_passes else grad))
        return model

    monkeypatch.setattr(loading, "load_policy", load_with_overflow)


@pytest.fixture
def overflow_once(monkeypatch):
    """One backward pass's gradients overflow: the first."""
    overflowing(monkeypatch, 1)


@pytest.fixture
def overflow_always(monkeypatch):
    """Every backward pass's gradients overflow, whatever the scale: no redo can save the update."""
    overflowing(monkeypatch, None)


def starting_scale(monkeypatch, scale: float) -> None:
    """Every GradScaler made from now on (accelerate's, ours on the CPU, PPO's) starts at ``scale``."""
    class Scaler(GRAD_SCALER):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "init_scale": scale})

    monkeypatch.setattr(torch.amp, "GradScaler", Scaler)


def _rows(synthetic_rows, count=4):
    return normalize_rows(synthetic_rows[:count], "translated_question", "translated_answer")[0]


def test_a_float16_grpo_step_that_overflows_is_redone_and_counted(tiny_model_dir, tiny_adapter_dir, synthetic_rows,
                                                                  tmp_path, overflow_once):
    import thai_grpo.methods.grpo as grpo

    spec = run_spec(tmp_path, "grpo", tiny_model_dir, tiny_adapter_dir, plan("grpo", GRPO), _rows(synthetic_rows),
                    dtype="float16", rollouts=tmp_path / "rollouts.jsonl")  # max_lost_update_share: 0, the default
    result = grpo.train(spec)
    assert result["resolved_args"]["fp16"]  # float16 autocast and the loss scaler, as on a T4
    assert (result["optimizer_steps_skipped"], result["nonfinite_grad_steps"], result["scaler_redos"]) == (0, 0, 1)
    flags = [(s["step"], s["optimizer_step_skipped"], s["nonfinite_grad"]) for s in result["steps"]]
    assert flags == [(1, False, False), (2, False, False), (3, False, False)]
    rollouts = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rollouts] == [1] * 4 + [2] * 4 + [3] * 4  # a redo draws no new completions
    assert {r["prompt_id"] for r in rollouts} <= {row["id"] for row in spec.train_rows}
    assert all(set(r["rewards"]) == {"correct", "format", "thai"} and "advantage" in r for r in rollouts)


def test_a_grpo_run_past_its_lost_update_share_stops_and_keeps_its_checkpoints(tiny_model_dir, tiny_adapter_dir,
                                                                             synthetic_rows, tmp_path, overflow_always):
    import thai_grpo.methods.grpo as grpo

    spec = run_spec(tmp_path, "grpo", tiny_model_dir, tiny_adapter_dir, plan("grpo", GRPO), _rows(synthetic_rows),
                    dtype="float16")
    with pytest.raises(LostUpdates, match=r"^grpo: 1 of 3 optimizer updates lost by step 1 \(1 skipped by the "
                                          r"float16 loss scaler"):
        grpo.train(spec)
    assert spec.checkpoint_dir.is_dir() and not spec.out_dir.exists()


def trained_lora(folder) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def dpo_pairs(tokenizer, rows: list[dict]) -> list[dict]:
    """A pair per row: a right answer with a think block chosen, a wrong one without rejected, as sampled tokens."""
    from thai_grpo.data.prompts import build_prompt

    pairs = []
    for row in rows:
        chosen, rejected = f"<think>x</think>\n{row['answer']}", f"<think></think>\n{row['answer'] + 1}"
        pairs.append({"prompt": build_prompt(row["question"]), "id": row["id"],
                      "chosen": [{"role": "assistant", "content": chosen}],
                      "rejected": [{"role": "assistant", "content": rejected}],
                      "prompt_ids": tokenizer(row["question"])["input_ids"], "completion_budget": 16,
                      "chosen_ids": tokenizer(chosen)["input_ids"] + [tokenizer.eos_token_id],
                      "rejected_ids": tokenizer(rejected)["input_ids"]})
    return pairs


@pytest.mark.parametrize("method", ["dpo", "ppo"])
def test_the_loss_scales_calibration_loses_no_update(tiny_model_dir, tiny_adapter_dir, synthetic_rows, tmp_path,
                                                     monkeypatch, method):
    """A float16 run whose scaler starts far too high (2^30: the tiny model's gradients overflow float16 there, as
    Qwen3-0.6B's may at 2^16) makes every planned update with max_lost_update_share 0, in a TRL trainer (DPO) and in
    PPO: each skip is counted and its step redone at half the scale, and the adapter is bit for bit the one a run
    started at the scale it settled at."""
    import thai_grpo.methods.dpo as dpo
    import thai_grpo.methods.ppo as ppo
    from thai_grpo.models.loading import load_tokenizer

    rows = _rows(synthetic_rows, 8)

    def run(name: str, scale: float) -> dict:
        starting_scale(monkeypatch, scale)
        if method == "dpo":
            spec = run_spec(tmp_path, name, tiny_model_dir, tiny_adapter_dir,
                            plan("dpo", GRPO, dpo={"per_device_train_batch_size": 2, "num_train_epochs": 1}),
                            dtype="float16", pairs=dpo_pairs(load_tokenizer(tiny_model_dir), rows[:6]))
            return {**dpo.train(spec), "adapter": trained_lora(spec.out_dir)}
        spec = run_spec(tmp_path, name, tiny_model_dir, tiny_adapter_dir,
                        plan("ppo", {"temperature": 1.0, "max_completion_length": 6}, ppo={**PPO, "score": "verifier"}),
                        rows, dtype="float16")
        return {**ppo.train(spec), "adapter": trained_lora(spec.out_dir)}

    high = run("high", 2.0 ** 30)
    redos = high["scaler_redos"]
    assert redos >= 1 and high["optimizer_steps_skipped"] == high["nonfinite_grad_steps"] == 0
    assert len(high["steps"]) == 3  # every step, none lost: with max_lost_update_share 0 a lost one stops the run
    calibrated = run("calibrated", 2.0 ** (30 - redos))  # where the high run's first update was made
    assert calibrated["scaler_redos"] == 0
    assert high["adapter"].keys() == calibrated["adapter"].keys()
    assert all(torch.equal(high["adapter"][key], calibrated["adapter"][key]) for key in high["adapter"])
    start = trained_lora(tiny_adapter_dir)
    assert any(not torch.equal(high["adapter"][key], start[key]) for key in start)  # and it did train


@pytest.mark.parametrize("dtype, skipped, redos", [("float16", 0, 1), ("bfloat16", 0, 0)])
def test_a_ppo_update_that_overflows_is_counted(tiny_model_dir, tiny_adapter_dir, synthetic_rows, tmp_path,
                                                overflow_once, dtype, skipped, redos):
    """float16: PPO's GradScaler skips the update, which is redone at half the scale; bfloat16 has no scaler, so the
    non-finite gradient is applied (and ruins the weights: every later update is non-finite too), which the counts
    show."""
    import thai_grpo.methods.ppo as ppo

    spec = run_spec(tmp_path, "ppo", tiny_model_dir, tiny_adapter_dir,
                    plan("ppo", {"temperature": 1.0, "max_completion_length": 6}, ppo={**PPO, "score": "verifier"}),
                    _rows(synthetic_rows), dtype=dtype, training={**TRAINING, "max_lost_update_share": 1.0})
    result = ppo.train(spec)
    first = result["steps"][0]
    assert (first["optimizer_steps_skipped"], first["scaler_redos"]) == (skipped, redos)
    assert result["optimizer_steps_skipped"] == skipped and result["scaler_redos"] == redos
    if dtype == "float16":
        assert [s["nonfinite_grad_steps"] for s in result["steps"]] == [0, 0, 0]  # redone: the weights stay finite
    else:
        assert first["nonfinite_grad_steps"] == 1 and result["nonfinite_grad_steps"] >= 1
