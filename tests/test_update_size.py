"""Update size: the gradient norm each method logged and how far its adapter moved from the SFT adapter."""

from __future__ import annotations

import math

import numpy as np
import pytest

from thai_grpo.analyses.update_size import (adapter_displacements, lora_tensors, mean_grad_norm,
                                           parameter_displacement)


def test_displacement_is_the_l2_norm_of_every_lora_change_by_hand():
    start = {"m.lora_A.weight": np.array([[1.0, 2.0]]), "m.lora_B.weight": np.array([[0.0], [1.0]])}
    final = {"m.lora_A.weight": np.array([[4.0, 2.0]]), "m.lora_B.weight": np.array([[0.0], [-3.0]])}
    # changes: A (3, 0), B (0, -4): sqrt(9 + 16) = 5
    assert parameter_displacement(final, start) == pytest.approx(5.0)
    assert parameter_displacement(start, start) == 0.0
    with pytest.raises(ValueError, match="different LoRA ranks"):
        parameter_displacement({"m.lora_A.weight": np.zeros((2, 2))}, start)
    with pytest.raises(ValueError, match="share no tensor names"):
        parameter_displacement({"other": np.zeros(1)}, start)


def test_adapters_are_read_from_safetensors_lora_tensors_only(tmp_path):
    from safetensors.numpy import save_file

    for name, a in (("sft", [[1.0, 1.0]]), ("grpo", [[1.0, 3.0]]), ("dr_grpo", [[2.0, 1.0]])):
        (tmp_path / name).mkdir()
        save_file({"x.lora_A.weight": np.array(a, dtype=np.float32), "x.lora_B.weight": np.ones((2, 1), np.float32),
                   "x.score.weight": np.full((1, 1), 9.0, np.float32)}, str(tmp_path / name / "adapter_model.safetensors"))
    assert set(lora_tensors(tmp_path / "sft")) == {"x.lora_A.weight", "x.lora_B.weight"}
    moved = adapter_displacements({"grpo": tmp_path / "grpo", "dr_grpo": tmp_path / "dr_grpo",
                                   "missing": tmp_path / "nowhere"}, tmp_path / "sft")
    assert moved == {"grpo": pytest.approx(2.0), "dr_grpo": pytest.approx(1.0), "missing": None}


def test_mean_grad_norm_reads_steps_first_then_trls_log():
    assert mean_grad_norm({"steps": [{"grad_norm": 1.0}, {"grad_norm": 3.0}]}) == 2.0
    trl = {"steps": [{"loss": 0.1}], "trl_log_history": [{"grad_norm": 0.5, "loss": 1}, {"train_runtime": 3.0},
                                                         {"grad_norm": 1.5}]}
    assert mean_grad_norm(trl) == 1.0
    assert mean_grad_norm({"steps": []}) is None
    assert math.isnan(mean_grad_norm({"steps": [{"grad_norm": float("nan")}]}))  # a NaN step shows, not hidden


def test_the_comparison_row_carries_each_runs_update_size():
    from thai_grpo.report.results import method_rows

    trains = {"grpo": {"trl_log_history": [{"grad_norm": 2.0}, {"grad_norm": 4.0}]},
              "dr_grpo": {"trl_log_history": [{"grad_norm": 0.5}]}}
    rows = {r["method"]: r for r in method_rows({}, trains, {}, None, displacements={"grpo": 0.8, "dr_grpo": 0.7})}
    grpo = next(r for name, r in rows.items() if r.get("update_size") and r["update_size"]["mean_grad_norm"] == 3.0)
    assert grpo["update_size"] == {"mean_grad_norm": 3.0, "adapter_displacement": 0.8}
    dr = next(r for r in rows.values() if (r.get("update_size") or {}).get("adapter_displacement") == 0.7)
    assert dr["update_size"]["mean_grad_norm"] == 0.5
