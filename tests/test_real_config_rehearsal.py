"""The real run, rehearsed: `snakemake --configfile config/qwen3-0.6b.yaml` executed end to end, offline, on CPU,
against a Hugging Face cache of stand-ins shaped like Qwen3-0.6B (tests/real_config_standins.py: its config.json but
for depth and width, no pad_token_id, the 151,936-row vocabulary with Qwen3's special tokens at their ids, a hub adapter
with dropout), with tiny sizes from a second config file. The chapter's whole comparison runs (SFT, GRPO, Dr.GRPO, RLOO,
DPO, PPO with a reward model and scored by the verifier); only the sizes and the weights are stand-ins. It runs as a
GPU from sm 8.0 runs it: every training stage's frozen weights in bfloat16 (base.dtype, honoured on a CPU too),
evaluation in float32; the float32 paths are the offline default's (tests/test_pipeline.py), and a T4's float16 is
rehearsed on top of it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from workflow import REPO, copy_workflow, run_snakemake

from thai_grpo.core.io import read_jsonl
from thai_grpo.core.rewards import has_think_block

REAL_CONFIG = yaml.safe_load((REPO / "config" / "qwen3-0.6b.yaml").read_text(encoding="utf-8"))
CHAPTER_PROMPT = "จงคิดทีละขั้นใน <think>...</think> แล้วจบด้วยคำตอบเป็นตัวเลขบรรทัดสุดท้าย"
MODELS = REAL_CONFIG["eval"]["models"]
CHAPTER_COMPARISON = {"base", "sft", "grpo", "dr_grpo", "dpo", "ppo"}  # the chapter's SFT/PPO/DPO/GRPO/Dr.GRPO
EXPECTED_STAGES = ({"dataset", "split", "base_model", "sft_adapter", "extra_heldout-mgsm_th", "token_logprobs",
                    "figures", "preference_pairs", "reward_model", "reward_model_accuracy"}
                   | {f"train-{m}" for m in MODELS if m not in ("base", "sft")}
                   | {f"sample-{m}" for m in MODELS} | {f"score-{m}" for m in MODELS}
                   | {f"sample_extra-mgsm_th-{m}" for m in MODELS} | {f"score_extra-mgsm_th-{m}" for m in MODELS})


def test_real_config_compares_every_method_of_the_chapter():
    assert set(MODELS) == CHAPTER_COMPARISON
    variants = REAL_CONFIG["variants"]
    assert variants["ppo_verifier"]["ppo"]["score"] == "verifier" and "score" not in variants["ppo"]["ppo"]


def test_real_config_sets_the_chapters_prompt():
    assert REAL_CONFIG["data"]["system_prompt"] == CHAPTER_PROMPT
    assert REAL_CONFIG["grpo"]["chat_template_kwargs"] == REAL_CONFIG["eval"]["chat_template_kwargs"] == \
        {"enable_thinking": True}


BFLOAT16 = "precision-bfloat16.yaml"
CONFIGS = ("config/qwen3-0.6b.yaml", "tiny.yaml", BFLOAT16)  # the rehearsal's config files, in their order


def offline_env(hf_home: Path) -> dict:
    """Offline, with ``hf_home`` as the only Hugging Face cache (no HF_HUB_CACHE / HF_DATASETS_CACHE override)."""
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_CACHE", "HF_DATASETS_CACHE")}
    return {**env, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    """The workflow copy after the real config's whole DAG ran on the stand-ins; (workdir, hf_home, tiny config)."""
    from real_config_standins import fill_hub_cache, precision_overrides

    root = tmp_path_factory.mktemp("rehearsal")
    workdir = copy_workflow(root / "workflow")
    fill_hub_cache(root / "hf_home", workdir / "tiny.yaml")
    (workdir / BFLOAT16).write_text(json.dumps(precision_overrides("bfloat16")))
    done = run_snakemake(workdir, "--cores", "2", "--configfile", *CONFIGS, timeout=1800,
                         env=offline_env(root / "hf_home"))
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return workdir, root / "hf_home", workdir / "tiny.yaml"


def read_samples(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_every_stage_ran_and_both_heldout_sets_are_reported(rehearsal):
    workdir, _, _ = rehearsal
    ran = {path.stem for path in (workdir / "results" / "benchmarks").glob("*.tsv")}
    assert EXPECTED_STAGES <= ran, EXPECTED_STAGES - ran
    results = json.loads((workdir / "results" / "results.json").read_text(encoding="utf-8"))
    assert list(results["eval"]) == MODELS
    mgsm = results["extra_sets"]["mgsm_th"]
    assert mgsm["title"] == "MGSM Thai" and mgsm["source"]["source"] == "local" and list(mgsm["eval"]) == MODELS
    assert mgsm["data"]["problems"] == mgsm["data"]["source_rows"] > 0
    assert set(mgsm["paired_tests"]) == {f"{m}_vs_sft" for m in MODELS if m not in ("base", "sft")}
    heldout = len((workdir / "results/data/heldout.jsonl").read_text(encoding="utf-8").splitlines())
    for model in MODELS:  # each set scored apart: the main numbers are the main set's, the second set's its own
        main = json.loads((workdir / f"results/eval/{model}/scores.json").read_text(encoding="utf-8"))
        assert results["eval"][model]["pass@1"] == main["pass@1"] and main["num_problems"] == heldout, model
        second = mgsm["eval"][model]
        assert second["num_problems"] == mgsm["data"]["problems"] and second["n_samples"] > 0, model
        for key in ["pass@1", "greedy_accuracy"]:
            assert second[key]["wilson_low"] <= second[key]["estimate"] <= second[key]["wilson_high"], (model, key)
    assert {"extra_heldout-mgsm_th", "sample_extra-mgsm_th-grpo", "score_extra-mgsm_th-sft"} <= set(
        results["run"]["benchmarks"])
    html = (workdir / "results" / "report.html").read_text(encoding="utf-8")
    assert "<h3>Second held-out set: MGSM Thai</h3>" in html and "Qwen/Qwen3-0.6B" in html
    assert f"{mgsm['data']['problems']} problems from" in html


@pytest.mark.slow
def test_the_base_is_shaped_like_qwen3_0_6b(rehearsal):
    """config.json is Qwen3-0.6B's but for depth and width (no pad_token_id: the reward model, PPO's value models and
    the verifier's fresh value model took it from the tokenizer); its tokenizer has Qwen3's special tokens at their
    ids; the adapter has dropout (PPO turned it off)."""
    from thai_grpo_tools.rehearsal import QWEN3_0_6B_CONFIG, STANDIN_SIZES

    workdir, _, _ = rehearsal
    config = json.loads((workdir / "results/model/base/config.json").read_text(encoding="utf-8"))
    assert "pad_token_id" not in config
    assert config == {**QWEN3_0_6B_CONFIG, **STANDIN_SIZES}
    assert config["head_dim"] * config["num_attention_heads"] == 2 * config["hidden_size"]
    added = {token["content"]: token for token in json.loads(
        (workdir / "results/model/base/tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]}
    assert {name: (added[name]["id"], added[name]["special"]) for name in
            ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")} == {
        "<|endoftext|>": (151643, True), "<|im_start|>": (151644, True), "<|im_end|>": (151645, True),
        "<think>": (151667, False), "</think>": (151668, False)}
    tokenizer_config = json.loads((workdir / "results/model/base/tokenizer_config.json").read_text(encoding="utf-8"))
    assert tokenizer_config["pad_token"] == "<|endoftext|>" and tokenizer_config["eos_token"] == "<|im_end|>"
    generation = json.loads((workdir / "results/model/base/generation_config.json").read_text(encoding="utf-8"))
    assert generation["eos_token_id"] == [151645, 151643] and generation["pad_token_id"] == 151643
    adapter = json.loads((workdir / "results/model/sft_adapter/adapter_config.json").read_text(encoding="utf-8"))
    assert adapter["lora_dropout"] > 0


@pytest.mark.slow
def test_every_method_trained_and_ppo_split_its_passes(rehearsal):
    workdir, _, _ = rehearsal
    results = json.loads((workdir / "results/results.json").read_text(encoding="utf-8"))
    assert set(results["eval"]) == CHAPTER_COMPARISON
    train = json.loads((workdir / "results/runs/ppo/train.json").read_text(encoding="utf-8"))
    assert [step["step"] for step in train["steps"]] == [1, 2]
    assert train["args"]["chunk_floats"] < 151936 * 300  # the tiny config's budget: one row's logits per chunk
    accuracy = json.loads((workdir / "results/eval/reward_model/accuracy.json").read_text(encoding="utf-8"))
    assert accuracy  # the reward model loaded on a base whose config.json has no pad_token_id


@pytest.mark.slow
def test_the_stand_ins_came_from_the_hub_cache(rehearsal):
    """The base model and adapter stages copied the cached snapshots: the tokenizer carries Qwen3's template and
    TRL's response template, so GRPOTrainer parsed every completion with parse_response."""
    workdir, _, _ = rehearsal
    tokenizer_config = json.loads((workdir / "results/model/base/tokenizer_config.json").read_text(encoding="utf-8"))
    assert tokenizer_config.get("response_template") is not None
    assert "enable_thinking" in (workdir / "results/model/base/chat_template.jinja").read_text(encoding="utf-8")
    assert (workdir / "results/model/sft_adapter/adapter_config.json").is_file()


@pytest.mark.slow
def test_completions_reach_the_rewards_with_their_think_block(rehearsal):
    workdir, _, _ = rehearsal
    train = json.loads((workdir / "results/runs/grpo/train.json").read_text(encoding="utf-8"))
    assert [step["step"] for step in train["steps"]] == [1, 2]
    assert all(step["rewards"]["format"] > 0 and step["rewards"]["thai"] > 0 for step in train["steps"])
    assert train["system_prompt"] == CHAPTER_PROMPT
    rollouts = read_jsonl(workdir / "results/runs/grpo/rollouts.jsonl")
    graded = [(line["completion"], line["rewards"]["format"]) for line in rollouts]
    assert any(has_think_block(text) and paid == 0.3 for text, paid in graded), graded


@pytest.mark.slow
def test_enable_thinking_reaches_the_template(rehearsal):
    """The stand-in opens a think block when the prompt leaves thinking on and answers bare when the template
    closed the block (enable_thinking: false): flipping the config's switch flips what the model writes."""
    workdir, hf_home, tiny = rehearsal
    samples = workdir / "results/eval/sft/samples.jsonl"

    def think_share() -> float:
        completions = [c["text"] for record in read_samples(samples) for c in record["completions"]]
        return sum(text.startswith("<think>") for text in completions) / len(completions)

    assert think_share() >= 0.5
    off = workdir / "thinking_off.yaml"
    off.write_text(json.dumps({"eval": {"chat_template_kwargs": {"enable_thinking": False}}}))
    done = run_snakemake(workdir, "--cores", "2", str(samples.relative_to(workdir)), "--configfile", *CONFIGS,
                         off.name, timeout=900, env=offline_env(hf_home))
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert think_share() == 0.0


@pytest.mark.slow
def test_the_rehearsal_trains_in_bfloat16_and_evaluates_in_float32(rehearsal):
    """The run card's stage_dtypes: bfloat16 for every training stage (SFT's adapter came from the hub), float32
    (eval.dtype) for every evaluation stage (held-out samples on both sets, preference pairs, token log-probs,
    reward model accuracy)."""
    workdir, _, _ = rehearsal
    dtypes = json.loads((workdir / "results/results.json").read_text())["run"]["stage_dtypes"]
    training = {stage: d for stage, d in dtypes.items() if stage.startswith("train-") or stage == "reward_model"}
    assert set(training) == {"train-grpo", "train-dr_grpo", "train-dpo", "train-ppo", "reward_model"}
    assert {record["dtype"] for record in training.values()} == {"bfloat16"}
    evaluation = {stage: d for stage, d in dtypes.items() if stage not in training}
    assert {"sample-grpo", "sample-sft", "sample_extra-mgsm_th-grpo", "preference_pairs", "token_logprobs",
            "reward_model_accuracy"} <= set(evaluation)
    # every evaluation stage in float32, its matmuls at full float32 precision (TF32 off), on the device named
    assert all(record == {"dtype": "float32", "device": "cpu", "matmul_precision": "highest"}
               for record in evaluation.values()), evaluation


@pytest.mark.slow
def test_a_float16_rehearsal_trains_in_float16(rehearsal):
    """The real config with base.dtype float16 (a T4's) on the CPU: GRPO, DPO and PPO (its reward model too) load
    their frozen weights in float16, as their records say. GRPO and PPO take one optimizer step each here: the
    records say what the weights were loaded in, which a second step does not change."""
    from real_config_standins import precision_overrides

    workdir, hf_home, tiny = rehearsal
    overrides = workdir / "precision-float16.yaml"
    one_step = {"grpo": {"max_steps": 1}, "variants": {"ppo": {"ppo": {"max_steps": 1}}}}
    overrides.write_text(json.dumps({**precision_overrides("float16"), **one_step}))
    trainings = ["grpo", "dpo", "ppo"]
    done = run_snakemake(workdir, "--cores", "2", *[f"results/runs/{run}/train.json" for run in trainings],
                         "--configfile", "config/qwen3-0.6b.yaml", tiny.name, overrides.name, timeout=1800,
                         env=offline_env(hf_home))
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    for run in trainings:
        train = json.loads((workdir / f"results/runs/{run}/train.json").read_text())
        assert train["weights_dtype"] == "float16", run
        # a T4's path on the CPU: float16 autocast and the loss scaler, every update counted (none lost here)
        assert (train["optimizer_steps_skipped"], train["nonfinite_grad_steps"]) == (0, 0), run
        if run != "ppo" and not train.get("skipped"):  # PPO's own loop has no TRL arguments
            assert train["resolved_args"]["fp16"], run
    # The stand-ins solve no training problem within their 24 tokens, so DPO and the reward model get no preference
    # pair and train nothing here (their float16 steps: tests/test_precision.py); they still load in float16.
    reward_model = json.loads((workdir / "results/model/reward_model.json").read_text())
    assert reward_model["weights_dtype"] == "float16"
    assert reward_model.get("skipped") or reward_model["resolved_args"]["fp16"]
    assert (reward_model["optimizer_steps_skipped"], reward_model["nonfinite_grad_steps"]) == (0, 0)
