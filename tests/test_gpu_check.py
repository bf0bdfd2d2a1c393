"""`make gpu-check` and `make rehearse-full` without a GPU: the check's one-line exits, the wheels it installs from,
and the rehearsal's sizes, pairs and comparison with the memory plan (thai_grpo_tools.rehearse_full)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from snakemake_dry_run import fake_nvidia_smi
from workflow import merged_configs

from thai_grpo.methods.dpo import token_rows
from thai_grpo.data.prompts import prompt_token_ids
from thai_grpo.jobs.memory_stages import CARD_GIB, CPU
from thai_grpo_tools.memory_plan import sizes_for_card
from thai_grpo_tools.rehearse_full import (PRESETS, STAGES, answer_pairs, comparison, device_precision, plans,
                                            predicted_bytes, problem_count, rehearsal_config, table)
from thai_grpo_tools.rehearsal import synthetic_rows

REPO = Path(__file__).resolve().parents[1]
REAL = merged_configs([REPO / "config/config.yaml", REPO / "config/qwen3-0.6b.yaml"])


def cuda_torch_here() -> bool:
    import torch

    return torch.cuda.is_available()


def gpu_check(tmp_path: Path, path: str, **env) -> subprocess.CompletedProcess:
    """scripts/gpu_check.sh with only ``path`` on the PATH (plus dirname, which it needs)."""
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    for tool in ("dirname",):
        (tools / tool).symlink_to(shutil.which(tool))
    environment = {**os.environ, "PATH": f"{path}{os.pathsep}{tools}", **env}
    return subprocess.run(["/bin/bash", str(REPO / "scripts/gpu_check.sh")], cwd=tmp_path, env=environment,
                          capture_output=True, text=True, timeout=120)


def test_without_a_gpu_it_stops_with_one_line(tmp_path):
    done = gpu_check(tmp_path, str(tmp_path / "empty"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "no NVIDIA GPU here" in done.stderr


@pytest.mark.skipif(cuda_torch_here(), reason="this machine has a CUDA torch: the check would run for real")
def test_with_a_gpu_but_no_cuda_torch_it_stops_with_one_line(tmp_path):
    bin_path = fake_nvidia_smi(tmp_path / "bin", gpus=2)["PATH"].split(os.pathsep)[0]
    done = gpu_check(tmp_path, bin_path, PYTHON=str(tmp_path / "no-python"))
    assert done.returncode == 2, done.stderr
    assert "GPU 1: NVIDIA H100" in done.stdout  # nvidia-smi's list first
    assert done.stderr.strip().count("\n") == 0 and "no Python with a CUDA build of torch" in done.stderr


@pytest.mark.skipif(cuda_torch_here() or (REPO / ".venv-gpu").exists(), reason="would use this machine's CUDA torch")
def test_with_the_machines_cuda_torch_but_no_wheels_it_says_how_to_get_them(tmp_path):
    bin_path = fake_nvidia_smi(tmp_path / "bin", gpus=1)["PATH"].split(os.pathsep)[0]
    python = tmp_path / "bin" / "cuda-python"  # a Python whose torch answers that CUDA is available, and its build
    python.write_text('#!/bin/sh\ncase "$*" in *version*) echo "torch 2.5.1+cu124, CUDA 12.4 build";; esac\nexit 0\n')
    python.chmod(0o755)
    done = gpu_check(tmp_path, bin_path, PYTHON=str(python), WHEELS=str(tmp_path / "no-wheels"))
    assert done.returncode == 2 and "run `make wheels` where pip reaches PyPI" in done.stderr, done.stderr
    first = done.stdout.splitlines()[0]  # said before anything else: what is measured is not .venv's torch
    assert first.startswith("gpu_check: FELL BACK to .venv-gpu: .venv's torch "), first
    assert f"this measures {python}'s torch 2.5.1+cu124, CUDA 12.4 build" in first, first
    venv = REPO / ".venv/bin/python"
    assert ("CPU build sees no CUDA GPU" if venv.exists() else "does not exist") in first, first
    assert not (REPO / ".venv-gpu").exists()


def test_the_fallback_venv_sees_the_torch_of_a_python_that_is_itself_a_venv(tmp_path):
    """GPU images often hold their CUDA torch in a venv (or conda env): a venv made from it with
    --system-site-packages alone sees the base interpreter's packages, not that torch. Here .venv plays that Python."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "requirements.txt").write_text("")
    venv = tmp_path / "venv-gpu"

    def gpu_venv() -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(REPO / "scripts/gpu_venv.sh"), str(REPO / ".venv/bin/python"), str(wheels),
                               str(venv)], capture_output=True, text=True, timeout=120)

    done = gpu_venv()
    assert done.returncode == 0, done.stderr
    where = subprocess.run([str(venv / "bin/python"), "-c", "import torch; print(torch.__file__)"],
                           capture_output=True, text=True, timeout=60)
    assert where.returncode == 0 and where.stdout.startswith(str(REPO / ".venv")), where.stderr
    (wheels / "requirements.txt").write_text("no-such-package==1.0\n")  # a wheel missing: one line, no venv left
    done = gpu_venv()
    assert done.returncode == 1 and "rerun `make wheels` with this Python" in done.stderr and not venv.exists()


@pytest.mark.skipif(cuda_torch_here(), reason="this machine has a CUDA torch: the check would run for real")
def test_gpu_check_names_the_torch_it_measures_in_its_first_line(tmp_path):
    """.venv's torch is taken where it sees CUDA, and said to be; a stand-in .venv here (the check's own copy)."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts/gpu_check.sh", repo / "scripts/gpu_check.sh")
    (repo / ".venv/bin").mkdir(parents=True)
    python = repo / ".venv/bin/python"  # answers as a CUDA torch, then fails the next step (torch's view)
    python.write_text('#!/bin/sh\ncase "$*" in *version*) echo "torch 2.5.1+cu124, CUDA 12.4 build";; '
                      '-) exit 3;; esac\nexit 0\n')
    python.chmod(0o755)
    bin_path = fake_nvidia_smi(tmp_path / "bin", gpus=1)["PATH"].split(os.pathsep)[0]
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "dirname").symlink_to(shutil.which("dirname"))
    done = subprocess.run(["/bin/bash", str(repo / "scripts/gpu_check.sh")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PATH": f"{bin_path}{os.pathsep}{tools}"})
    assert done.stdout.splitlines()[0] == "gpu_check: measuring .venv's own torch 2.5.1+cu124, CUDA 12.4 build"
    assert "GPU 0: NVIDIA H100" in done.stdout and done.returncode != 0


def test_make_wheels_downloads_every_pin_but_torch_without_resolving(tmp_path):
    done = subprocess.run(["make", "wheels", f"WHEELS={tmp_path}", "PIP_DOWNLOAD=echo pip download"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lock = [line for line in (REPO / "requirements.txt").read_text().splitlines() if "==" in line]
    listed = [line for line in (tmp_path / "requirements.txt").read_text().splitlines() if "==" in line]
    assert listed == [line for line in lock if not line.startswith("torch==")] and len(listed) == len(lock) - 1
    assert "--no-deps" in done.stdout  # the lock is complete: resolving would pull torch and its CUDA libraries


# ----------------------------------------------------------------------------------------- the rehearsal's pieces
def test_presets_keep_the_real_config_but_its_sizes():
    cpu, chapter = rehearsal_config(REAL, "cpu"), rehearsal_config(REAL, "chapter")
    from thai_grpo.workflow import variant_settings

    steps = {name: variant_settings(chapter, name)["grpo"]["max_steps"] for name in ("grpo", "grpo_fast", "rloo")}
    assert steps == {"grpo": 3, "grpo_fast": 1, "rloo": 1}  # the grpo variant's three: float16's scale calibrates
    assert variant_settings(cpu, "grpo")["grpo"]["max_steps"] == 1
    for config in (cpu, chapter):
        assert config["grpo"]["beta"] == REAL["grpo"]["beta"]
        assert config["base"]["name_or_path"] == "Qwen/Qwen3-0.6B" and config["variants"]["ppo"]["ppo"]["max_steps"] == 1
    assert chapter["grpo"]["per_device_train_batch_size"] == REAL["grpo"]["per_device_train_batch_size"]
    t4 = sizes_for_card(REAL, CARD_GIB)  # auto sizes as the chapter's T4 chooses them
    assert chapter["eval"] == {**REAL["eval"], "batch_size": t4["eval.batch_size"]}
    assert cpu["eval"]["max_new_tokens"] < REAL["eval"].get("max_new_tokens", 256)
    assert chapter["variants"]["ppo"]["ppo"]["chunk_floats"] == t4["ppo.chunk_floats"]["ppo"]
    assert problem_count(chapter) == (REAL["variants"]["ppo"]["ppo"]["batch_size"], t4["eval.batch_size"])
    assert problem_count(cpu) == (4, 2)
    with pytest.raises(ValueError, match="use one of"):
        rehearsal_config(REAL, "huge")
    assert set(STAGES) >= {"grpo", "dpo", "reward_model", "ppo", "sample", "token_logprobs"} and set(PRESETS) == {
        "cpu", "chapter"}


def test_pairs_are_as_long_as_the_completion_budget(tiny_tokenizer):
    rows = synthetic_rows(3)
    tokenizer, system = tiny_tokenizer, REAL["data"]["system_prompt"]
    pairs = answer_pairs(tokenizer, rows, system, completion_tokens=24)
    for pair, row in zip(pairs, rows):
        assert pair["chosen"][0]["content"].endswith(f"</think>\n{row['answer']}")
        assert pair["rejected"][0]["content"].endswith(f"</think>\n{row['answer'] + 1}")
        for side in ("chosen", "rejected"):
            tokens = len(tokenizer(pair[side][0]["content"], add_special_tokens=False)["input_ids"])
            assert abs(tokens - 24) <= 2, tokens
            assert pair[f"{side}_ids"] == tokenizer(pair[side][0]["content"], add_special_tokens=False)["input_ids"]
    # DPO trains on the pairs' token ids, as the pipeline's sampled pairs store them: the prompt as the policy reads it
    assert [pair["prompt_ids"] for pair in pairs] == prompt_token_ids(tokenizer, [r["question"] for r in rows], system)
    assert token_rows(pairs) and {pair["completion_budget"] for pair in pairs} == {24}


def test_each_stage_is_compared_with_its_own_prediction_at_the_rehearsals_sizes():
    config = rehearsal_config(REAL, "cpu")
    stage_plan = plans(config, CPU, prompt=110, completions=4)
    grpo = predicted_bytes("grpo", stage_plan)
    assert grpo == max(p["peak_bytes"] for p in stage_plan if p["stage"].startswith("GRPO full"))
    assert "4 completions of 16 tokens" in next(p["note"] for p in stage_plan if p["stage"] == "GRPO full: train step")
    rows = comparison([{"stage": "grpo", "peak_bytes": grpo // 2, "seconds_per_step": 3.0, "steps": 1},
                       {"stage": "sample", "peak_bytes": None}, {"stage": "ppo", "error": "boom"}], stage_plan)
    assert rows[0]["ratio"] == 0.5 and rows[1]["ratio"] is None and rows[2]["predicted_bytes"] > 0
    markdown = table(rows, "peak RSS")
    assert "| grpo |" in markdown and "| 0.5 | 3.0 | 1 |" in markdown
    assert device_precision("cpu", "auto") == CPU and device_precision("cuda", "float16").frozen_bytes == 2


def test_a_forced_float16_stage_acts_as_a_t4():
    module = rehearse_module()
    assert module.stage_env("cuda", "float16", None)["THAI_GRPO_CAPABILITY"] == "7.5"
    assert "THAI_GRPO_CAPABILITY" not in module.stage_env("cuda", "bfloat16", None)
    assert "THAI_GRPO_CAPABILITY" not in module.stage_env("cpu", "auto", 1)
    assert module.stage_env("cpu", "auto", 1)["OMP_NUM_THREADS"] == "1"
    assert yaml.safe_load((REPO / "config/qwen3-0.6b.yaml").read_text())["passk"]["batch_size"] == "auto"


def test_the_check_sizes_auto_for_the_card_it_runs_on():
    t4, h200 = rehearsal_config(REAL, "chapter"), rehearsal_config(REAL, "chapter", card_gib=139.0)
    own = sizes_for_card(REAL, 139.0)
    assert h200["eval"]["batch_size"] == own["eval.batch_size"] > t4["eval"]["batch_size"]
    assert h200["variants"]["ppo"]["ppo"]["chunk_floats"] == own["ppo.chunk_floats"]["ppo"] > \
        t4["variants"]["ppo"]["ppo"]["chunk_floats"]
    assert t4["training"]["max_lost_update_share"] == 1.0  # a lost update is recorded, not a stop


def test_the_check_takes_the_real_weights_when_the_hub_cache_holds_them(tmp_path, tiny_model_dir, tiny_adapter_dir):
    from real_config_standins import hub_snapshot
    from thai_grpo_tools.rehearse_full import cached_real_weights

    cache = tmp_path / "hub"
    assert cached_real_weights(REAL, cache) is None  # an empty cache: random weights
    base = hub_snapshot(tmp_path / "hub", REAL["base"]["name_or_path"], REAL["base"]["revision"])
    shutil.copytree(tiny_model_dir, base, dirs_exist_ok=True)
    assert cached_real_weights(REAL, cache) is None  # the base without the adapter is not enough
    adapter = hub_snapshot(tmp_path / "hub", REAL["sft"]["name_or_path"], REAL["sft"]["revision"])
    shutil.copytree(tiny_adapter_dir, adapter, dirs_exist_ok=True)
    found = cached_real_weights(REAL, cache)
    assert Path(found["base"]) == base and Path(found["adapter"]) == adapter
    assert found["weights"] == "the real Qwen/Qwen3-0.6B and kobkrit/qwen3-0.6b-th-sft-lora from the hub cache"


def test_each_training_stage_says_whether_its_loss_was_finite_and_its_updates_counted():
    from thai_grpo_tools.rehearse_full import update_record

    result = {"steps": [{"loss": 0.5}, {"loss": float("nan")}], "optimizer_steps_skipped": 1, "nonfinite_grad_steps": 1}
    assert update_record(result) == {"loss_finite": False, "optimizer_steps_skipped": 1, "nonfinite_grad_steps": 1}
    assert update_record({"steps": [{"policy_loss": 0.1}]})["loss_finite"] is True  # PPO's loss
    rows = comparison([{"stage": "grpo", "peak_bytes": 2 ** 30, "seconds_per_step": 3.0, "steps": 1,
                        **update_record(result)}, {"stage": "sample", "peak_bytes": 2 ** 30}],
                      plans(rehearsal_config(REAL, "cpu"), CPU, prompt=110, completions=4))
    markdown = table(rows, "torch.cuda.max_memory_reserved")
    assert "loss; updates lost |" in markdown and "| NOT FINITE; 1 skipped, 1 non-finite |" in markdown
    assert markdown.splitlines()[-1].endswith("| - |")  # a stage that trains nothing
    old = table([{**rows[0], "loss_finite": None}][:0] + [rows[1]], "torch.cuda.max_memory_allocated")
    assert "updates lost" not in old  # records made before the counts render as they did


def test_the_checks_allocator_uses_expandable_segments():
    module = rehearse_module()
    assert module.stage_env("cuda", "bfloat16", None)["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


def rehearse_module():
    import thai_grpo_tools.rehearse_full as module

    return module


def test_the_early_stopping_decode_stage_compacts_its_cache(tiny_model_dir, tiny_adapter_dir, monkeypatch):
    """make gpu-check's decode stage, on the CPU with the tiny model: a third of the problems stop after an eighth of
    the budget, which a real model's answers do and random weights never do, so the decode loop compacts its cache
    (the memory the plan must cover) and decodes the rest of the rows to the budget."""
    import thai_grpo.models.decoding as decoding

    module = rehearse_module()
    compactions = []
    compact = decoding.SharedPromptCache.compact
    monkeypatch.setattr(decoding.SharedPromptCache, "compact",
                        lambda cache, kept: compactions.append(len(kept)) or compact(cache, kept))
    rows = [{"id": i, "question": f"{i} + {i}", "answer": 2 * i} for i in range(6)]
    ev = {"batch_size": 6, "num_samples": 2, "max_new_tokens": 16}
    record = module.decode_with_early_stops(str(tiny_model_dir), str(tiny_adapter_dir), rows, "system", ev,
                                            module.Meter("cpu"))
    assert compactions == [4]  # problems 0 and 3 stopped: 4 of 6 prompts kept
    assert record["decode_steps"] == 16 and record["steps"] == 1


def test_a_stage_whose_own_auto_size_is_not_the_plans_is_an_error():
    """The stages size auto with the jobs' own code after noting the card's free memory; the check fails a stage whose
    choice differs from the size the plan was computed at (the plan would then speak of another run)."""
    stage_plan = plans(rehearsal_config(REAL, "cpu"), CPU, prompt=110, completions=4)
    rows = comparison([{"stage": "sample", "peak_bytes": 2 ** 30, "sized": {"batch_size": 8, "planned": 8}},
                       {"stage": "ppo", "peak_bytes": 2 ** 30, "sized": {"chunk_floats": 2 ** 28,
                                                                          "planned": 2 ** 29}}], stage_plan)
    assert "error" not in rows[0]
    assert rows[1]["error"] == f"sized {{'chunk_floats': {2 ** 28}}} where the plan sized {2 ** 29}"


def test_the_t4_pass_caps_the_card_and_grpo_runs_three_steps():
    """gpu-check on a larger card runs a float16 pass capped at a T4's 14.75 GiB (each stage process's allocations
    capped, its sizes chosen for the cap) with the stages a T4's memory decides; the bfloat16 pass trains only (the
    evaluation stages compute in float32 whatever it is); GRPO makes three steps, where float16's loss scale
    calibrates."""
    from thai_grpo_tools.rehearse_full import GPU_CHECK_PASSES

    script = (REPO / "scripts/gpu_check.sh").read_text()
    assert "--pass \"$pass\"" in script and "float16-t4" in script
    assert GPU_CHECK_PASSES["float16-t4"][:2] == ("float16", CARD_GIB)
    assert {"ppo", "sample", "decode_stops"} <= set(GPU_CHECK_PASSES["float16-t4"][2])
    assert "sample" not in GPU_CHECK_PASSES["bfloat16"][2]
    assert PRESETS["chapter"]["variants"]["grpo"]["grpo"]["max_steps"] == 3
    assert "decode_stops" in rehearse_module().ORDER


def test_the_cuda_graphs_stage_compares_graphed_sampling_with_eager(tiny_model_dir, tiny_adapter_dir, monkeypatch):
    """make gpu-check's comparison behind eval.cuda_graphs, on the CPU with the tiny model: three held-out sampling
    calls, eager, then twice through ``graphed_step`` (counted; left eager here: its compile is
    test_decoding's), each timed, the same tokens."""
    import thai_grpo.models.decoding as decoding

    graphed = []
    monkeypatch.setattr(decoding, "graphed_step", lambda: graphed.append(1) or decoding.decode_step)
    module = rehearse_module()
    rows = [{"id": i, "question": f"{i} + {i}", "answer": 2 * i} for i in range(3)]
    ev = {"batch_size": 3, "num_samples": 2, "max_new_tokens": 12, "temperature": 1.0, "seed": 7}
    record = module.graphs_against_eager(str(tiny_model_dir), str(tiny_adapter_dir), rows, "system", ev,
                                         module.Meter("cpu"))
    assert record["same_tokens"] is True and record["steps"] == 3 and len(graphed) == 2
    assert all(record[key] > 0 for key in ("eager_s", "graphed_first_s", "graphed_s"))
