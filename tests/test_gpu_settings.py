"""GPU settings without a GPU: per-capability dtype/attention, vLLM sampling parameters and TRL's vLLM fields."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from thai_grpo.core.accelerators import attention_implementation, flash_attention_2_possible, precision_summary
from thai_grpo.evaluation.vllm_sampling import (
    completion_from_tokens,
    grpo_vllm_overrides,
    problem_seeds,
    prompt_token_ids,
    records_from_completions,
    resolve_vllm_dtype,
    vllm_engine_kwargs,
    vllm_greedy_params_kwargs,
    vllm_lora_rank,
    vllm_max_model_len,
    vllm_sampling_params_kwargs,
)

T4, A100, H100, CPU = (7, 5), (8, 0), (9, 0), None
EVAL = {"num_samples": 8, "temperature": 1.0, "max_new_tokens": 256, "seed": 1234, "batch_size": 16}


@pytest.mark.parametrize("capability, dtype, fp16, bf16", [
    (T4, "float16", True, False),      # sm 7.5: no native bf16 (is_bf16_supported() lies through emulation)
    (A100, "bfloat16", False, True),
    (H100, "bfloat16", False, True),
    (CPU, "float32", False, False),
])
def test_precision_summary_per_device(capability, dtype, fp16, bf16):
    summary = precision_summary(capability)
    assert (summary["dtype"], summary["fp16"], summary["bf16"]) == (dtype, fp16, bf16)
    assert summary["use_cpu"] is (capability is None)
    assert not (summary["fp16"] and summary["bf16"])


@pytest.mark.parametrize("capability", [T4, A100, H100, CPU])
def test_attention_is_sdpa_everywhere(capability):
    assert attention_implementation(capability) == "sdpa"
    assert precision_summary(capability)["attn_implementation"] == "sdpa"


def test_flash_attention_2_only_from_ampere():
    assert [flash_attention_2_possible(c) for c in (T4, A100, H100, CPU)] == [False, True, True, False]


def test_precision_summary_agrees_with_choose_dtype():
    from thai_grpo.core.accelerators import choose_dtype

    for capability in [(6, 0), T4, (8, 6), (8, 9), H100, CPU]:
        assert precision_summary(capability)["dtype"] == choose_dtype(capability)


def test_sampling_params_match_the_transformers_path():
    kwargs = vllm_sampling_params_kwargs(EVAL)
    assert kwargs == {"n": 8, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "max_tokens": 256,
                      "seed": 1234}
    greedy = vllm_greedy_params_kwargs(EVAL)
    assert greedy["n"] == 1 and greedy["temperature"] == 0.0 and greedy["max_tokens"] == 256


def test_sampling_params_coerce_types():
    kwargs = vllm_sampling_params_kwargs({**EVAL, "num_samples": "4", "temperature": 1, "max_new_tokens": 96.0})
    assert (kwargs["n"], kwargs["temperature"], kwargs["max_tokens"]) == (4, 1.0, 96)
    assert isinstance(kwargs["temperature"], float) and isinstance(kwargs["n"], int)


def test_problem_seeds_give_every_sample_its_own_stream():
    seeds = problem_seeds(1234, num_problems=5, num_samples=8)
    streams = [s + j for s in seeds for j in range(8)]  # vLLM seeds sample j of a request with seed + j
    assert len(set(streams)) == 5 * 8
    assert seeds[0] == 1234


def test_lora_rank_rounds_up_to_what_vllm_accepts():
    assert [vllm_lora_rank(r) for r in (2, 8, 16, 17, 64, 300)] == [8, 8, 16, 32, 64, 320]
    with pytest.raises(ValueError):
        vllm_lora_rank(1024)


def test_engine_kwargs_and_context_length():
    assert vllm_max_model_len([120, 180, 90], 256) == 436
    plain = vllm_engine_kwargs("results/model/base", "float16", 1234, 436, 0.85, None)
    assert plain["model"] == plain["tokenizer"] == "results/model/base"
    assert plain["max_model_len"] == 436 and not plain.get("enable_lora") and plain["trust_remote_code"] is False
    lora = vllm_engine_kwargs("results/model/base", "bfloat16", 1234, 436, 0.85, 16)
    assert lora["enable_lora"] is True and lora["max_lora_rank"] == 16 and lora["max_loras"] == 1


@pytest.mark.parametrize("dtype, capability, expected", [
    ("auto", T4, "float16"), ("auto", H100, "bfloat16"), ("auto", None, "auto"), ("float32", T4, "float32"),
])
def test_vllm_dtype(dtype, capability, expected):
    assert resolve_vllm_dtype(dtype, capability) == expected


def test_records_have_the_transformers_format(tiny_tokenizer):
    from thai_grpo.models.sampling import score_completion

    rows = [{"id": "p1", "question": "q1", "answer": 7}, {"id": "p2", "question": "q2", "answer": -3}]
    text = "<think>คิด</think>\n7"
    eos = tiny_tokenizer.eos_token_id
    ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    stopped = completion_from_tokens(tiny_tokenizer, ids + [eos], "stop")
    cut = completion_from_tokens(tiny_tokenizer, ids, "length")
    assert stopped == {"text": text, "num_tokens": len(ids) + 1, "truncated": False, "token_ids": ids + [eos]}
    assert cut["truncated"] is True and cut["num_tokens"] == len(ids)
    records = records_from_completions(rows, [[stopped, cut], [cut, cut]], [stopped, cut])
    assert [r["id"] for r in records] == ["p1", "p2"]
    assert set(records[0]) == {"id", "question", "gold", "completions", "greedy"}
    assert records[0]["completions"][0] == score_completion(stopped, 7)
    assert records[0]["greedy"]["correct"] == 1.0 and records[1]["greedy"]["correct"] == 0.0
    with pytest.raises(ValueError):
        records_from_completions(rows, [[stopped]], [stopped, cut])


def test_prompts_are_token_identical_to_the_transformers_path(tiny_tokenizer):
    from thai_grpo.data.problems import SYSTEM_PROMPT
    from thai_grpo.models.sampling import encode_prompts

    questions = ["มีแอปเปิ้ล 3 ผล ได้เพิ่ม 4 ผล มีกี่ผล", "ข้อสอง"]
    ours = prompt_token_ids(tiny_tokenizer, questions, SYSTEM_PROMPT)
    encoded = encode_prompts(tiny_tokenizer, questions, SYSTEM_PROMPT, {})
    for ids, row, mask in zip(ours, encoded["input_ids"].tolist(), encoded["attention_mask"].tolist()):
        assert ids == [token for token, keep in zip(row, mask) if keep]


def test_grpo_vllm_overrides():
    assert grpo_vllm_overrides(False, 0.3) == {"use_vllm": False}
    on = grpo_vllm_overrides(True, 0.3)
    assert on["use_vllm"] is True and on["vllm_mode"] == "colocate"
    assert on["vllm_gpu_memory_utilization"] == 0.3 and on["vllm_max_model_length"] == 1024
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError):
            grpo_vllm_overrides(True, bad)


def test_vllm_fields_exist_in_the_installed_trl():
    from trl import GRPOConfig

    known = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert set(grpo_vllm_overrides(True, 0.3, sleep_mode=True)) <= known


def test_grpo_config_accepts_the_vllm_fields_without_vllm(tmp_path):
    """Building the config needs no vLLM (only GRPOTrainer does, when use_vllm is true)."""
    from trl import GRPOConfig

    overrides = grpo_vllm_overrides(True, 0.3)
    config = GRPOConfig(**overrides, use_cpu=True, bf16=False, output_dir=str(tmp_path), report_to="none")
    for key, value in overrides.items():
        assert getattr(config, key) == value


def test_sample_heldout_vllm_explains_a_missing_vllm(tmp_path, monkeypatch):
    import builtins

    from thai_grpo.evaluation.vllm_sampling import sample_heldout_vllm

    real_import = builtins.__import__

    def no_vllm(name, *args, **kwargs):
        if name == "vllm" or name.startswith("vllm."):
            raise ImportError("No module named 'vllm'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_vllm)
    with pytest.raises(RuntimeError, match="eval.use_vllm"):
        sample_heldout_vllm(tmp_path, None, [], "system", EVAL)


def test_fake_engine_outputs_map_to_records(tiny_tokenizer):
    """The shape vLLM returns (RequestOutput.outputs[*].token_ids / finish_reason) maps to the records."""
    eos = tiny_tokenizer.eos_token_id
    ids = tiny_tokenizer("<think>a</think>\n5", add_special_tokens=False)["input_ids"]
    output = SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids + [eos], finish_reason="stop"),
                                      SimpleNamespace(token_ids=ids[:2], finish_reason="length")])
    completions = [completion_from_tokens(tiny_tokenizer, c.token_ids, c.finish_reason) for c in output.outputs]
    record = records_from_completions([{"id": 1, "question": "q", "answer": 5}], [completions], [completions[0]])[0]
    assert [c["truncated"] for c in record["completions"]] == [False, True]
    assert record["completions"][0]["total"] == pytest.approx(1.3)  # correct + format (a, not Thai: no thai bonus)
