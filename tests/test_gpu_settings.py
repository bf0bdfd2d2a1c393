"""GPU settings without a GPU: per-capability dtype/attention, the prompts' token ids, this machine's GPUs."""

from __future__ import annotations

import math

import pytest

from thai_grpo_tools.gpu_settings import precision_summary
from thai_grpo.data.prompts import prompt_token_ids

T4, A100, H100, CPU = (7, 5), (8, 0), (9, 0), None


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


def test_prompt_token_ids_are_the_encoded_prompts_without_padding(tiny_tokenizer):
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.models.sampling import encode_prompts

    questions = ["มีแอปเปิ้ล 3 ผล ได้เพิ่ม 4 ผล มีกี่ผล", "ข้อสอง"]
    ours = prompt_token_ids(tiny_tokenizer, questions, SYSTEM_PROMPT)
    encoded = encode_prompts(tiny_tokenizer, questions, SYSTEM_PROMPT, {})
    for ids, row, mask in zip(ours, encoded["input_ids"].tolist(), encoded["attention_mask"].tolist()):
        assert ids == [token for token, keep in zip(row, mask) if keep]


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
