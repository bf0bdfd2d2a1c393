"""GPU settings without a GPU: per-capability dtype/attention, vLLM sampling parameters and TRL's vLLM fields."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from thai_grpo_tools.gpu_settings import precision_summary
from thai_grpo.evaluation.vllm_sampling import (completion_from_tokens, prompt_token_ids, records_from_completions,
                                                 resolve_vllm_dtype, vllm_engine_kwargs, vllm_lora_rank,
                                                 vllm_request_params)

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
    assert precision_summary(capability)["attn_implementation"] == "sdpa"


def test_flash_attention_2_only_from_ampere():
    assert [precision_summary(c)["flash_attention_2_possible"] for c in (T4, A100, H100, CPU)] == \
        [False, True, True, False]


def test_precision_summary_agrees_with_choose_dtype():
    from thai_grpo.jobs.devices import choose_dtype

    for capability in [(6, 0), T4, (8, 6), (8, 9), H100, CPU]:
        assert precision_summary(capability)["dtype"] == choose_dtype(capability)


def test_sampling_params_match_the_transformers_path():
    kwargs, *_, greedy = vllm_request_params(EVAL, 2)
    assert kwargs == {"n": 8, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "max_tokens": 256,
                      "seed": 1234}
    assert greedy["n"] == 1 and greedy["temperature"] == 0.0 and greedy["max_tokens"] == 256


def test_sampling_params_coerce_types():
    kwargs = vllm_request_params({**EVAL, "num_samples": "4", "temperature": 1, "max_new_tokens": 96.0}, 1)[0]
    assert (kwargs["n"], kwargs["temperature"], kwargs["max_tokens"]) == (4, 1.0, 96)
    assert isinstance(kwargs["temperature"], float) and isinstance(kwargs["n"], int)


def test_problem_seeds_give_every_sample_its_own_stream():
    sampled = vllm_request_params(EVAL, 5)[:5]
    streams = [p["seed"] + j for p in sampled for j in range(8)]  # vLLM seeds sample j of a request with seed + j
    assert len(set(streams)) == 5 * 8
    assert sampled[0]["seed"] == 1234


def test_lora_rank_rounds_up_to_what_vllm_accepts():
    assert [vllm_lora_rank(r) for r in (2, 8, 16, 17, 64, 300)] == [8, 8, 16, 32, 64, 320]
    with pytest.raises(ValueError):
        vllm_lora_rank(1024)


def test_engine_kwargs_and_context_length():
    plain = vllm_engine_kwargs("results/model/base", "float16", 1234, [120, 180, 90], 256, 0.85, None)
    assert plain["model"] == plain["tokenizer"] == "results/model/base"
    assert plain["max_model_len"] == 436 and not plain.get("enable_lora") and plain["trust_remote_code"] is False
    lora = vllm_engine_kwargs("results/model/base", "bfloat16", 1234, [436], 0, 0.85, 16)
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
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.models.sampling import encode_prompts

    questions = ["มีแอปเปิ้ล 3 ผล ได้เพิ่ม 4 ผล มีกี่ผล", "ข้อสอง"]
    ours = prompt_token_ids(tiny_tokenizer, questions, SYSTEM_PROMPT)
    encoded = encode_prompts(tiny_tokenizer, questions, SYSTEM_PROMPT, {})
    for ids, row, mask in zip(ours, encoded["input_ids"].tolist(), encoded["attention_mask"].tolist()):
        assert ids == [token for token, keep in zip(row, mask) if keep]


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


def test_a_float32_vllm_engine_starts_with_tf32_kept_off_in_its_processes(tiny_model_dir, monkeypatch):
    """vLLM samples in engine processes of its own, which the torch check in the job's process cannot see: a float32
    engine starts with NVIDIA_TF32_OVERRIDE=0 in the environment they inherit (cuBLAS then never uses TF32); a
    16-bit one is left as it is. A fake vLLM records the environment its engine started in."""
    import sys
    from types import ModuleType

    from thai_grpo.evaluation.vllm_sampling import TF32_OVERRIDE, sample_heldout_vllm

    started = []

    class LLM:
        def __init__(self, **kwargs):
            started.append((kwargs["dtype"], __import__("os").environ.get(TF32_OVERRIDE)))

        def generate(self, requests, params, lora_request=None):
            return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[5], finish_reason="stop")] * p.n)
                    for p in params]

    vllm, lora = ModuleType("vllm"), ModuleType("vllm.lora.request")
    vllm.LLM, vllm.SamplingParams = LLM, lambda **kwargs: SimpleNamespace(**kwargs)
    lora.LoRARequest = object
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.lora", ModuleType("vllm.lora"))
    monkeypatch.setitem(sys.modules, "vllm.lora.request", lora)
    monkeypatch.setenv(TF32_OVERRIDE, "1")
    monkeypatch.delenv(TF32_OVERRIDE)  # absent again after the test, whatever the engine set
    rows = [{"id": 0, "question": "1 + 1", "answer": 2}]
    sample_heldout_vllm(tiny_model_dir, None, rows, "system", EVAL, dtype="bfloat16")
    records = sample_heldout_vllm(tiny_model_dir, None, rows, "system", EVAL, dtype="float32")
    assert started == [("bfloat16", None), ("float32", "0")]
    assert len(records[0]["completions"]) == EVAL["num_samples"]


# ----------------------------------------------------------------------------------------- this machine's GPUs
def test_gpus_are_counted_from_nvidia_smi(tmp_path):
    from snakemake_dry_run import fake_nvidia_smi

    from thai_grpo.jobs.devices import local_gpu_count
    from thai_grpo.jobs.gpus import gpus_listed

    mig = "GPU 0: NVIDIA A100 (UUID: GPU-1)\n  MIG 3g.40gb Device 0: (UUID: MIG-1)\nGPU 1: NVIDIA A100 (UUID: GPU-2)\n"
    assert gpus_listed(mig) == 2 and gpus_listed("") == 0
    env = fake_nvidia_smi(tmp_path / "bin", gpus=2)
    assert local_gpu_count({"PATH": env["PATH"]}) == 2
    assert local_gpu_count({"PATH": env["PATH"], "CUDA_VISIBLE_DEVICES": ""}) == 0  # every GPU hidden
    assert local_gpu_count({"PATH": env["PATH"], "CUDA_VISIBLE_DEVICES": "1"}) == 1  # the ones it lists
    assert local_gpu_count({"PATH": str(tmp_path / "nowhere")}) == 0  # no nvidia-smi: a CPU-only machine


def test_the_gpu_limit_is_one_job_per_gpu_and_none_without(tmp_path):
    from snakemake_dry_run import fake_nvidia_smi

    from thai_grpo.jobs.devices import local_gpu_limit

    for gpus in (1, 8):  # each job claims a GPU of its own
        assert local_gpu_limit({"PATH": fake_nvidia_smi(tmp_path / f"bin{gpus}", gpus=gpus)["PATH"]}) == {"gpu": gpus}
    assert local_gpu_limit({"PATH": str(tmp_path / "nowhere")}) is None


@pytest.mark.parametrize("visible, pinned", [
    (None, "0"), ("0,1", "0"), ("3, 5", "3"), ("GPU-aaaa,GPU-bbbb", "GPU-aaaa"), ("1", None), ("", None),
    ("-1", None),
])
def test_one_device_per_job(visible, pinned):
    from thai_grpo.jobs.gpus import one_device, pin_one_device

    assert one_device(visible) == pinned
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    pin_one_device(environ)
    assert environ.get("CUDA_VISIBLE_DEVICES") == (pinned if pinned is not None else visible)
    assert pin_one_device(environ) is None  # idempotent: already one device (or none)


@pytest.mark.parametrize("real, requested, acting", [
    ((9, 0), None, (9, 0)), ((9, 0), "7.5", (7, 5)), ((8, 0), "8.0", (8, 0)), (None, None, None),
])
def test_acting_capability(real, requested, acting):
    from thai_grpo.jobs.gpus import acting_capability
    from thai_grpo_tools.gpu_settings import precision_summary

    assert acting_capability(real, requested) == acting
    if requested == "7.5":  # an H100 acting as a T4 takes the T4's path
        assert precision_summary(acting)["fp16"] and precision_summary(acting)["dtype"] == "float16"


@pytest.mark.parametrize("real, requested, message", [
    ((7, 5), "8.0", "above this GPU"), (None, "7.5", "needs a CUDA GPU"), ((9, 0), "T4", "MAJOR.MINOR"),
])
def test_acting_capability_refuses(real, requested, message):
    from thai_grpo.jobs.gpus import acting_capability

    with pytest.raises((RuntimeError, ValueError), match=message):
        acting_capability(real, requested)


# ----------------------------------------------------------------------------------------- what runs in 16 bits
def decoder_dtypes(model, call) -> set[str]:
    """The dtypes of every decoder layer's MLP activations (its up projection's output) while ``call()`` runs (the
    residual stream itself stays float32 under autocast: float32 + 16-bit promotes to float32)."""
    seen: set[str] = set()
    layers = [m for name, m in model.named_modules() if name.endswith("mlp.up_proj")]
    hooks = [layer.register_forward_hook(lambda module, args, output: seen.add(str(output.dtype))) for layer in layers]
    try:
        call()
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def test_peft_generate_bypasses_accelerates_autocast(tiny_model_dir, tiny_adapter_dir):
    """A float32 base prepared by accelerate for bf16 mixed precision: forward runs in bfloat16, but generate (how
    TRL samples the rollouts) does not go through the wrapped forward and runs in float32."""
    import torch
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    from thai_grpo.models.loading import load_policy

    policy = load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True, dtype="float32")
    AcceleratorState._reset_state(True)  # a trainer earlier in this process left its own mixed precision set
    policy = Accelerator(mixed_precision="bf16", cpu=True).prepare(policy)
    ids = torch.tensor([[5, 6, 7]])
    assert decoder_dtypes(policy, lambda: policy(input_ids=ids)) == {"torch.bfloat16"}
    with torch.no_grad():
        assert decoder_dtypes(policy, lambda: policy.generate(input_ids=ids, max_new_tokens=3, do_sample=False)) \
            == {"torch.float32"}


def test_a_16_bit_base_samples_in_16_bits_and_trains_float32_adapters(tiny_model_dir, tiny_adapter_dir):
    """What a GPU gets (dtype auto -> 16 bits, bfloat16 here, on the CPU): the frozen weights in 16 bits, the LoRA
    matrices in float32, and generate's activations in 16 bits without any autocast."""
    import torch

    from model_dtypes import trainable_dtypes
    from thai_grpo.models.loading import load_policy

    policy = load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True, dtype="bfloat16")
    assert trainable_dtypes(policy) == {"trainable": {"float32"}, "frozen": {"bfloat16"}}
    with torch.no_grad():
        assert decoder_dtypes(policy, lambda: policy.generate(input_ids=torch.tensor([[5, 6, 7]]), max_new_tokens=3,
                                                               do_sample=False)) == {"torch.bfloat16"}


def test_on_a_cpu_auto_stays_float32(tiny_model_dir, tiny_adapter_dir):
    from model_dtypes import trainable_dtypes
    from thai_grpo.models.loading import load_policy

    assert trainable_dtypes(load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True)) == \
        {"trainable": {"float32"}, "frozen": {"float32"}}


def test_value_and_reward_heads_train_in_float32_on_a_16_bit_base(tiny_model_dir):
    """The copied score head (modules_to_save) is trainable but not a LoRA matrix: PEFT leaves it in the base's
    dtype; upcast_trainable makes it float32 (fp16's GradScaler refuses float16 gradients)."""
    from thai_grpo.methods.ppo import fresh_value_model
    from thai_grpo.methods.reward_model import fresh_reward_model
    from model_dtypes import trainable_dtypes

    lora = {"r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"]}
    bare = fresh_reward_model(tiny_model_dir, lora, "bfloat16")
    assert "bfloat16" in trainable_dtypes(bare)["trainable"]  # what PEFT alone leaves
    value = fresh_value_model(tiny_model_dir, lora, dtype="bfloat16")
    assert trainable_dtypes(value) == {"trainable": {"float32"}, "frozen": {"bfloat16"}}


def test_ppo_runs_without_autocast_or_scaling_on_a_cpu(tiny_model_dir, tiny_adapter_dir):
    import contextlib

    from thai_grpo.methods.ppo import autocast_like, grad_scaler
    from thai_grpo.models.loading import load_policy

    policy = load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True)
    assert isinstance(autocast_like(policy), contextlib.nullcontext)
    assert not grad_scaler(policy).is_enabled()


def test_ppos_16_bit_path_updates_float32_parameters(tiny_model_dir, tiny_adapter_dir):
    """What PPO runs on a GPU, on the CPU in bfloat16: 16-bit frozen bases, float32 LoRA and score head, every pass
    under autocast to the frozen dtype. The step moves the trained parameters, which stay float32; the losses are
    finite; the first minibatch's ratio is 1 (the rollout's log-probs come from the same autocast)."""
    import torch

    from thai_grpo.methods.ppo import (_update, autocast_like, completion_mask, fresh_value_model, sequence_logprobs,
                                       token_scores)
    from thai_grpo.methods.settings import PPOSettings
    from model_dtypes import trainable_dtypes
    from thai_grpo.models.loading import load_policy

    torch.manual_seed(0)
    models = {"policy": load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True, dtype="bfloat16"),
              "value": fresh_value_model(tiny_model_dir, {"r": 2, "lora_alpha": 4, "target_modules": ["q_proj"]},
                                         dtype="bfloat16")}
    for model in models.values():
        assert trainable_dtypes(model) == {"trainable": {"float32"}, "frozen": {"bfloat16"}}
    ids = torch.randint(3, 100, (4, 10))
    mask = completion_mask(torch.tensor([6, 3, 5, 1]), 6)
    attention = torch.cat([torch.ones(4, 4, dtype=torch.long), mask.long()], 1)
    with torch.no_grad(), autocast_like(models["policy"]):
        logprobs = sequence_logprobs(models["policy"], ids, attention, 4, 1.0)
        values = token_scores(models["value"], ids, attention)[:, 3:-1] * mask
    rollout = {"ids": ids, "width": 4, "mask": mask, "attention": attention, "logprobs": logprobs, "values": values,
               "advantages": torch.randn(4, 6) * mask, "returns": torch.randn(4, 6) * mask}
    params = [p for m in models.values() for p in m.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    settings = PPOSettings(score="verifier", batch_size=4, num_mini_batches=1, num_ppo_epochs=1, learning_rate=1e-2,
                           temperature=1.0)
    stats, updates = _update(rollout, 1, settings, 42, models, torch.optim.AdamW(params, lr=1e-2), params)
    assert all(math.isfinite(value) for value in stats.values()) and stats["approx_kl"] == 0.0
    assert updates == [{"step": 1, "optimizer_step_skipped": False, "nonfinite_grad": False, "scaler_redos": 0}]
    assert any(not torch.equal(a, b) for a, b in zip(before, params))
    assert all(p.dtype == torch.float32 for p in params)
