"""Precision: every training stage loads its frozen weights in base.dtype (16 bits on a CPU too, the trained LoRA and
heads in float32) and records the dtype it really ran in; every evaluation stage scores in eval.dtype, merged only
where merging keeps a small update; float16's loss scaler in PPO's step. All on the tiny 1-layer Qwen3 of conftest."""

from __future__ import annotations

import math

import pytest
import torch

from thai_grpo.data.problems import normalize_rows
from thai_grpo.data.prompts import SYSTEM_PROMPT, build_prompt
from model_dtypes import trainable_dtypes
from run_specs import TRAINING, plan, run_spec
from thai_grpo.models.frozen import load_for_evaluation, merge_keeps_update
from thai_grpo.models.loading import load_tokenizer, weights_dtype
from thai_grpo.report.results import stage_dtypes

SIXTEEN_BITS = ["bfloat16", "float16"]


def test_only_float32_merges_a_small_update():
    assert merge_keeps_update("float32") and merge_keeps_update("float64")
    assert not merge_keeps_update("bfloat16") and not merge_keeps_update("float16")
    assert merge_keeps_update("auto")  # this machine has no GPU: auto is float32


@pytest.mark.parametrize("dtype", ["float32", *SIXTEEN_BITS])
def test_evaluation_model_is_in_eval_dtype_and_merged_only_in_float32(tiny_model_dir, tiny_adapter_dir, dtype):
    model = load_for_evaluation(tiny_model_dir, tiny_adapter_dir, dtype)
    assert weights_dtype(model) == dtype and not model.training
    assert hasattr(model, "peft_config") == (dtype != "float32")  # 16 bits: the adapter stays unmerged...
    if dtype != "float32":  # ...in float32, added to the 16-bit base's output
        assert {str(p.dtype) for n, p in model.named_parameters() if "lora_" in n} == {"torch.float32"}


def test_a_16_bit_merge_loses_a_small_update_that_float32_keeps(tiny_model_dir, tiny_adapter_dir, tmp_path):
    """The adapter's B matrices nudged by 1e-5 (the real run's update size): merged into float32 weights the logits
    move; merged into bfloat16 weights the nudge rounds away in most places."""
    from peft import PeftModel

    from thai_grpo.models.loading import load_base_model

    nudged = PeftModel.from_pretrained(load_base_model(tiny_model_dir), str(tiny_adapter_dir))
    with torch.no_grad():
        for name, parameter in nudged.named_parameters():
            if "lora_A" in name:
                parameter.fill_(0.5)
            if "lora_B" in name:
                parameter.fill_(1e-5)
    nudged.save_pretrained(tmp_path / "nudged")
    ids = torch.tensor([[5, 6, 7, 8, 9]])

    def shift(dtype: str, merged: bool) -> float:
        from thai_grpo.models.loading import load_policy

        before = load_policy(tiny_model_dir, tiny_adapter_dir, dtype=dtype, merged=merged).eval()
        after = load_policy(tiny_model_dir, tmp_path / "nudged", dtype=dtype, merged=merged).eval()
        with torch.no_grad():
            return (after(input_ids=ids).logits.double() - before(input_ids=ids).logits.double()).abs().mean().item()

    exact = shift("float32", merged=False)
    assert exact > 0 and shift("float32", merged=True) == pytest.approx(exact, rel=0.05)
    assert abs(shift("bfloat16", merged=True) - exact) > 0.5 * exact


def test_stage_dtypes_reads_what_each_stage_recorded():
    trains = {"grpo": {"weights_dtype": "bfloat16"}, "ppo": {"weights_dtype": "bfloat16"}, "old": {}}
    cpu = {"device": "cpu", "matmul_precision": "highest"}
    scores = {"sft": {"dtype": "float32", **cpu}, "grpo": {"dtype": "float32"}}  # grpo: recorded before precision
    recorded = stage_dtypes(trains, scores, pairs={"dtype": "float32", **cpu}, reward_model={"dtype": "float32", **cpu},
                            kl_real={"dtype": "float32", **cpu}, reward_model_train={"weights_dtype": "bfloat16"},
                            extra_sets={"mgsm_th": {"scores": {"grpo": {"dtype": "float32", **cpu}}}})
    evaluated = {"dtype": "float32", **cpu}
    assert recorded == {"train-grpo": {"dtype": "bfloat16"}, "train-ppo": {"dtype": "bfloat16"},
                        "reward_model": {"dtype": "bfloat16"}, "sample-sft": evaluated, "sample-grpo": {"dtype": "float32"},
                        "sample_extra-mgsm_th-grpo": evaluated, "preference_pairs": evaluated,
                        "token_logprobs": evaluated, "reward_model_accuracy": evaluated}


def test_a_float32_evaluation_refuses_tf32_matmuls_and_records_its_precision():
    from thai_grpo.models.sampling import evaluation_precision

    assert evaluation_precision("float32", "cpu") == {"device": "cpu", "matmul_precision": "highest"}
    assert evaluation_precision("bfloat16", "cpu") == {"device": "cpu", "matmul_precision": "bfloat16 weights"}
    torch.set_float32_matmul_precision("high")  # TF32 (or bfloat16 passes on a CPU) allowed for float32 matmuls
    try:
        with pytest.raises(RuntimeError, match="float32 evaluation with TF32 matmuls on"):
            evaluation_precision("float32", "cpu")
        assert evaluation_precision("bfloat16", "cpu")["matmul_precision"] == "bfloat16 weights"
    finally:
        torch.set_float32_matmul_precision("highest")


@pytest.mark.parametrize("switch", ["matmul", "global", "mixed"])
def test_tf32_through_the_fp32_precision_api_is_refused_too(switch):
    """torch's newer API turns TF32 on without the legacy flags (the backend's own setting, or the global one it
    inherits), and a backend set by the legacy call keeps TF32 whatever the global setting says: each stops a float32
    evaluation with its one line (the old check read only the legacy flags, and torch refuses that read here)."""
    from thai_grpo.models.sampling import evaluation_precision, tf32_switch

    assert tf32_switch() is None
    matmul = torch.backends.cuda.matmul
    try:
        if switch == "matmul":
            matmul.fp32_precision = "tf32"
        elif switch == "global":
            matmul.fp32_precision = "none"  # the backend inherits the global setting
            torch.backends.fp32_precision = "tf32"
        else:  # the legacy call turns it on, a later global setting of the new API does not turn it off
            torch.set_float32_matmul_precision("high")
            torch.backends.fp32_precision = "ieee"
        assert tf32_switch() is not None
        with pytest.raises(RuntimeError, match=r"^a float32 evaluation with TF32 matmuls on \(.+\) computes"):
            evaluation_precision("float32", "cpu")
        assert evaluation_precision("float16", "cpu")["matmul_precision"] == "float16 weights"
    finally:
        torch.backends.fp32_precision = "none"
        matmul.fp32_precision = "none"
        torch.set_float32_matmul_precision("highest")
    assert tf32_switch() is None


# ---------------------------------------------------------------------------------- training in 16 bits on a CPU
def _rows(synthetic_rows, count=4):
    rows, _ = normalize_rows(synthetic_rows[:count], "translated_question", "translated_answer")
    return rows


GRPO = {"num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 6, "max_steps": 1,
        "learning_rate": 1e-3, "beta": 0.04, "loss_type": "grpo", "scale_rewards": "group", "save_steps": 10}


@pytest.mark.parametrize("dtype", SIXTEEN_BITS)
def test_grpo_and_dpo_train_with_a_16_bit_frozen_base_on_a_cpu(tiny_model_dir, tiny_adapter_dir, synthetic_rows,
                                                               tmp_path, dtype):
    from safetensors.torch import load_file

    import thai_grpo.methods.dpo as dpo_method
    import thai_grpo.methods.grpo as grpo_method

    rows = _rows(synthetic_rows)
    grpo = grpo_method.train(run_spec(tmp_path, "grpo", tiny_model_dir, tiny_adapter_dir, plan("grpo", GRPO), rows,
                                      dtype=dtype))
    assert grpo["weights_dtype"] == dtype and [s["step"] for s in grpo["steps"]] == [1]
    # one precision: the trainer's autocast follows the frozen weights' dtype, on a CPU too
    resolved = grpo["resolved_args"]
    assert resolved["use_cpu"] and (resolved["bf16"], resolved["fp16"]) == (dtype == "bfloat16", dtype == "float16")
    assert grpo["optimizer_steps_skipped"] == grpo["nonfinite_grad_steps"] == 0
    saved = load_file(str(tmp_path / "grpo" / "adapter_model.safetensors"))
    assert {str(t.dtype) for t in saved.values()} == {"torch.float32"}  # the LoRA trained in float32
    assert all(torch.isfinite(t).all() for t in saved.values())
    pairs = [{"prompt": build_prompt(r["question"]), "id": r["id"],
              "chosen": [{"role": "assistant", "content": f"<think>x</think>\n{r['answer']}"}],
              "rejected": [{"role": "assistant", "content": f"<think></think>\n{r['answer'] + 1}"}]} for r in rows]
    tokenizer = load_tokenizer(tiny_model_dir)
    for pair, row in zip(pairs, rows):  # DPO reads the sampled tokens (thai_grpo.methods.dpo.token_rows)
        pair.update(prompt_ids=tokenizer(row["question"])["input_ids"], completion_budget=16,
                    chosen_ids=tokenizer(pair["chosen"][0]["content"])["input_ids"] + [tokenizer.eos_token_id],
                    rejected_ids=tokenizer(pair["rejected"][0]["content"])["input_ids"])
    dpo = dpo_method.train(run_spec(tmp_path, "dpo", tiny_model_dir, tiny_adapter_dir,
                                    plan("dpo", GRPO, dpo={"per_device_train_batch_size": 4, "num_train_epochs": 1}),
                                    dtype=dtype, pairs=pairs))
    assert dpo["weights_dtype"] == dtype and math.isfinite(dpo["steps"][0]["loss"])
    assert (dpo["resolved_args"]["fp16"], dpo["resolved_args"]["bf16"]) == (dtype == "float16", dtype == "bfloat16")
    assert dpo["optimizer_steps_skipped"] == dpo["nonfinite_grad_steps"] == 0


@pytest.mark.parametrize("dtype", SIXTEEN_BITS)
def test_ppo_and_its_reward_model_train_with_16_bit_frozen_weights_on_a_cpu(tiny_model_dir, tiny_adapter_dir,
                                                                           synthetic_rows, tmp_path, dtype):
    import thai_grpo.methods.ppo as ppo_method
    from thai_grpo.methods.ppo import load_models
    from thai_grpo.methods.reward_model import train_reward_model

    rows = _rows(synthetic_rows)
    pairs = [{"prompt": build_prompt(r["question"]), "id": r["id"],
              "chosen": [{"role": "assistant", "content": f"<think>x</think>\n{r['answer']}"}],
              "rejected": [{"role": "assistant", "content": f"<think></think>\n{r['answer'] + 1}"}]} for r in rows]
    reward = train_reward_model(tiny_model_dir, pairs, {"max_steps": 1, "per_device_train_batch_size": 4}, None,
                                tmp_path / "rm", tmp_path / "ckpt-rm", 0, None, TRAINING, dtype=dtype)
    assert reward["weights_dtype"] == dtype and len(reward["steps"]) == 1
    assert (reward["resolved_args"]["fp16"], reward["resolved_args"]["bf16"]) == (dtype == "float16", dtype == "bfloat16")
    models = load_models(tiny_model_dir, tiny_adapter_dir, tmp_path / "rm", "reward_model", dtype=dtype)
    assert {name: weights_dtype(model) for name, model in models.items()} == dict.fromkeys(models, dtype)
    assert trainable_dtypes(models["policy"])["trainable"] == trainable_dtypes(models["value"])["trainable"] == \
        {"float32"}
    assert hasattr(models["reference"], "peft_config")  # not merged in 16 bits: it starts equal to the policy
    ppo_plan = plan("ppo", {"temperature": 1.0, "max_completion_length": 6},
                    ppo={"max_steps": 1, "batch_size": 4, "num_ppo_epochs": 1})
    result = ppo_method.train(run_spec(tmp_path, "ppo", tiny_model_dir, tiny_adapter_dir, ppo_plan, rows,
                                       dtype=dtype, reward_dir=tmp_path / "rm", system_prompt="SYS"))
    step = result["steps"][0]
    assert result["weights_dtype"] == dtype and math.isfinite(step["value_loss"])
    # the first minibatch's policy is the rollout's and the reference's: k1 starts at zero up to 16-bit rounding
    assert abs(step["kl"]) < 1e-2


def test_sft_trains_a_float32_adapter_on_a_bfloat16_base(tiny_model_dir, synthetic_rows, tmp_path):
    from safetensors.torch import load_file

    from thai_grpo.data.problems import sft_records
    from thai_grpo.models.sft import train_sft_adapter

    history = train_sft_adapter(tiny_model_dir, sft_records(_rows(synthetic_rows), SYSTEM_PROMPT),
                                {"r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"]},
                                {"max_steps": 1, "per_device_train_batch_size": 4}, tmp_path / "sft",
                                tmp_path / "ckpt-sft", 0, dtype="bfloat16")
    assert math.isfinite(next(log["loss"] for log in history if "loss" in log))
    saved = load_file(str(tmp_path / "sft" / "adapter_model.safetensors"))
    assert {str(t.dtype) for t in saved.values()} == {"torch.float32"}


# ---------------------------------------------------------------------------------- float16's loss scaler
def test_ppo_scales_float16_losses_and_skips_a_step_whose_gradients_overflow(tiny_model_dir, tiny_adapter_dir):
    """``grad_scaler`` is on for float16 frozen weights, on a CPU too (torch's GradScaler runs there): the loss is
    multiplied by the scale, unscaled before clipping, and a step whose gradients hold an inf is skipped and the
    scale halved; bfloat16 and float32 get a disabled scaler."""
    from thai_grpo.methods.ppo import autocast_like, grad_scaler
    from thai_grpo.models.loading import load_policy

    assert not grad_scaler(load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True, dtype="bfloat16")).is_enabled()
    policy = load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True, dtype="float16")
    scaler = grad_scaler(policy)
    assert scaler.is_enabled() and scaler.get_scale() == 2.0 ** 16
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.1)
    ids = torch.tensor([[5, 6, 7, 8]])

    def loss():
        with autocast_like(policy):
            return policy(input_ids=ids, labels=ids).loss

    scaled = scaler.scale(loss())
    assert scaled.item() == pytest.approx(loss().item() * 2.0 ** 16, rel=1e-2)
    scaled.backward()
    params[0].grad[0, 0] = float("inf")  # an overflow in the scaled gradients
    scaler.unscale_(optimizer)  # PPO's loop unscales before clipping: the inf is found here
    before = [p.detach().clone() for p in params]
    scaler.step(optimizer)
    scaler.update()
    assert all(torch.equal(a, p) for a, p in zip(before, params)) and scaler.get_scale() == 2.0 ** 15
    optimizer.zero_grad()
    scaler.scale(loss()).backward()
    scaler.step(optimizer)
    scaler.update()
    assert any(not torch.equal(a, p) for a, p in zip(before, params)) and scaler.get_scale() == 2.0 ** 15
