"""A PPO run killed with SIGKILL after a checkpoint resumes from it and ends exactly where an uninterrupted run ends:
every step's numbers, the policy adapter and the value model (tiny 1-layer Qwen3, the reward model's path)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_STEPS, KILL_AFTER = 5, 2
RUNNER = """
import json, sys
from pathlib import Path
from thai_grpo.methods import RunSpec
from thai_grpo.methods.ppo import train
from thai_grpo.jobs.job import set_threads
set_threads(1)
base, adapter, reward, rows, out, checkpoints = sys.argv[1:7]
settings = {"max_steps": %d, "batch_size": 4, "num_ppo_epochs": 2, "num_mini_batches": 2, "save_steps": 1,
            "learning_rate": 1e-3, "missing_eos_penalty": 1.0}
plan = {"variant": "ppo", "method": "ppo", "group": "method", "rewards": ["correct", "format", "thai"],
        "grpo_args": {"temperature": 1.0, "max_completion_length": 12, "reference": "sft"}, "ppo": settings}
result = train(RunSpec(run="ppo", plan=plan, base_dir=Path(base), adapter_dir=Path(adapter),
                       train_rows=json.load(open(rows)), system_prompt="SYS", out_dir=Path(out),
                       checkpoint_dir=Path(checkpoints), seed=42, reward_dir=Path(reward),
                       training={"max_lost_update_share": 0.0, "report_to": "none"},
                       rollouts=Path(out + ".rollouts.jsonl")))
json.dump(result, open(out + ".json", "w"))
""" % MAX_STEPS


def run_args(tmp_path: Path, name: str, base, adapter, reward, rows) -> list[str]:
    return [sys.executable, str(tmp_path / "runner.py"), str(base), str(adapter), str(reward), str(rows),
            str(tmp_path / name / "adapter"), str(tmp_path / name / "checkpoints")]


def tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return {f"{path.relative_to(folder)}:{name}": tensor for path in sorted(folder.rglob("*.safetensors"))
            for name, tensor in load_file(path).items()}


@pytest.mark.slow
def test_killed_ppo_resumes_to_the_uninterrupted_result(tmp_path, tiny_model_dir, tiny_adapter_dir, synthetic_rows):
    from thai_grpo.methods.ppo import fresh_value_model

    reward = tmp_path / "reward_model"  # untrained: its path (and the value model's start) is what counts here
    fresh_value_model(tiny_model_dir, {"r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"]}) \
        .save_pretrained(reward, safe_serialization=True)
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([{"question": r["translated_question"], "answer": r["answer"]}
                                for r in synthetic_rows[:12]], ensure_ascii=False))
    (tmp_path / "runner.py").write_text(RUNNER)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}

    checkpoints = tmp_path / "killed" / "checkpoints"
    process = subprocess.Popen(run_args(tmp_path, "killed", tiny_model_dir, tiny_adapter_dir, reward, rows), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 240
    while not (checkpoints / f"checkpoint-{KILL_AFTER}" / "trainer_state.json").is_file():
        assert process.poll() is None, f"PPO ended before it could be killed:\n{process.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, "no checkpoint within 240 s"
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert not (tmp_path / "killed" / "adapter").exists()

    resumed = subprocess.run(run_args(tmp_path, "killed", tiny_model_dir, tiny_adapter_dir, reward, rows), env=env,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from checkpoint-" in resumed.stdout + resumed.stderr
    fresh = subprocess.run(run_args(tmp_path, "fresh", tiny_model_dir, tiny_adapter_dir, reward, rows), env=env,
                           capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-3000:]

    killed_result = json.loads((tmp_path / "killed" / "adapter.json").read_text())
    fresh_result = json.loads((tmp_path / "fresh" / "adapter.json").read_text())
    assert [s["step"] for s in killed_result["steps"]] == list(range(1, MAX_STEPS + 1))
    assert killed_result["steps"] == fresh_result["steps"]
    assert killed_result["optimizer_steps_skipped"] == killed_result["nonfinite_grad_steps"] == 0
    rollouts = [(tmp_path / name / "adapter.rollouts.jsonl").read_text() for name in ("killed", "fresh")]
    assert rollouts[0] == rollouts[1] and len(rollouts[0].splitlines()) == MAX_STEPS * 4  # the redone steps once
    assert not checkpoints.exists(), "checkpoints are removed once the run succeeds"
    resumed_tensors, fresh_tensors = tensors(tmp_path / "killed" / "adapter"), tensors(tmp_path / "fresh" / "adapter")
    assert any(key.startswith("value_model") for key in fresh_tensors)
    assert resumed_tensors.keys() == fresh_tensors.keys()
    assert all((resumed_tensors[key] == fresh_tensors[key]).all() for key in fresh_tensors)


@pytest.mark.slow
def test_verifier_scored_ppo_needs_no_reward_model(tmp_path, tiny_model_dir, tiny_adapter_dir, synthetic_rows):
    """ppo_verifier's path: the code rewards are the score, the value model starts at V = 0 (a zeroed head)."""
    from run_specs import plan, run_spec

    from thai_grpo.methods.ppo import train

    rows = [{"question": r["translated_question"], "answer": r["answer"]} for r in synthetic_rows[:4]]
    verifier = plan("ppo", {"temperature": 1.0, "max_completion_length": 8},
                    ppo={"score": "verifier", "max_steps": 1, "batch_size": 4, "num_ppo_epochs": 1,
                         "missing_eos_penalty": 1.0})
    result = train(run_spec(tmp_path, "out", tiny_model_dir, tiny_adapter_dir, verifier, rows, system_prompt="SYS"))
    step = result["steps"][0]
    assert result["score"] == "verifier" and set(result["models_in_memory"]) == {"policy", "reference", "value"}
    assert step["value_mean"] == 0.0  # the fresh value head predicts 0 before its first update
    # the score is the code reward minus the penalty for each completion cut at the budget (8 tokens: most are)
    assert step["score_mean"] == pytest.approx(step["reward_mean"] - step["clipped_ratio"])
    with pytest.raises(ValueError, match="needs the reward model"):
        train(run_spec(tmp_path, "o2", tiny_model_dir, tiny_adapter_dir, plan("ppo", rewards=["correct"]), rows))
