"""The memory plan's pieces against brute force: parameter counts of instantiated models, the activation count
against the tensors autograd itself saves, the chunk sizes the code uses; and the plan of the real config."""

from __future__ import annotations

import pytest
import torch
from workflow import REPO, merged_configs

from thai_grpo.jobs.memory_plan import (ATTENTION_TARGETS, MLP_TARGETS, Lora, Shape, base_parameters,
                                          generation_floats, logprob_pass_floats, lora_parameters, ppo_update_floats,
                                          rows_per_chunk, sampling_kv_floats, saved_per_token_layer)
from thai_grpo.jobs.memory_stages import CPU, T4, attention_bias_bytes
from thai_grpo_tools.memory_plan import QWEN3_0_6B, stage_plans

# Stand-ins with Qwen3-0.6B's ratios (head_dim = 2 x hidden / heads, KV heads = heads / 2, intermediate = 3 x hidden)
SHAPES = [Shape(vocab_size=151936, hidden_size=32, intermediate_size=96, num_layers=2, num_heads=4, num_kv_heads=2,
                head_dim=16),
          Shape(vocab_size=1000, hidden_size=64, intermediate_size=192, num_layers=3, num_heads=4, num_kv_heads=2,
                head_dim=32)]


def qwen3_config(shape: Shape, **extra):
    from transformers import Qwen3Config

    return Qwen3Config(vocab_size=shape.vocab_size, hidden_size=shape.hidden_size,
                       intermediate_size=shape.intermediate_size, num_hidden_layers=shape.num_layers,
                       num_attention_heads=shape.num_heads, num_key_value_heads=shape.num_kv_heads,
                       head_dim=shape.head_dim, tie_word_embeddings=True, **extra)


@pytest.mark.parametrize("shape", SHAPES)
def test_parameter_counts_match_instantiated_models(shape):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3ForCausalLM, Qwen3ForSequenceClassification

    causal = Qwen3ForCausalLM(qwen3_config(shape))
    assert base_parameters(shape) == sum(p.numel() for p in causal.parameters())
    assert Shape.from_config(causal.config) == shape
    score = Qwen3ForSequenceClassification(qwen3_config(shape, num_labels=1))
    assert base_parameters(shape, "score") == sum(p.numel() for p in score.parameters())
    for targets in (ATTENTION_TARGETS, ATTENTION_TARGETS + MLP_TARGETS):
        lora = Lora(r=4, target_modules=targets)
        peft = get_peft_model(Qwen3ForCausalLM(qwen3_config(shape)), LoraConfig(r=4, target_modules=list(targets)))
        assert lora_parameters(shape, lora) == sum(p.numel() for p in peft.parameters() if p.requires_grad)


def test_qwen3_0_6b_has_its_published_size():
    assert base_parameters(QWEN3_0_6B) == 596_049_920  # "0.6B", 0.44B without the tied embedding
    assert base_parameters(QWEN3_0_6B) - QWEN3_0_6B.vocab_size * QWEN3_0_6B.hidden_size == 440_467_456


def saved_floats_per_token(shape: Shape, lora: Lora, batch: int = 2, length: int = 24, padded: bool = False) -> float:
    """What autograd saves in the decoder layers (parameters excluded), per token, counted by saved_tensors_hooks;
    ``padded``: one row left-padded, so sdpa gets a mask (its float copy per layer, ``attention_bias_bytes``, apart)."""
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(Qwen3ForCausalLM(qwen3_config(shape)),
                           LoraConfig(r=lora.r, target_modules=list(lora.target_modules),
                                      lora_dropout=lora.lora_dropout))
    model.train()
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(tensor):
        pointer = tensor.untyped_storage().data_ptr()
        if pointer not in parameters:
            saved[pointer] = tensor.untyped_storage().nbytes()
        return tensor

    mask = torch.ones(batch, length, dtype=torch.long)
    mask[0, :length // 3] = 0 if padded else 1
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model.get_base_model().model(input_ids=torch.randint(0, shape.vocab_size, (batch, length)), attention_mask=mask)
    rope = 2 * length * shape.head_dim * 4  # cos and sin, per position, shared by the layers and the batch
    bias = attention_bias_bytes(shape, batch, length, 4) if padded else 0
    return (sum(saved.values()) - rope - bias) / 4 / (batch * length)


@pytest.mark.parametrize("lora", [Lora(r=8, target_modules=ATTENTION_TARGETS),
                                  Lora(r=4, target_modules=ATTENTION_TARGETS + MLP_TARGETS),
                                  Lora(r=8, target_modules=ATTENTION_TARGETS, lora_dropout=0.05)])
@pytest.mark.parametrize("padded", [False, True])
def test_saved_activations_match_what_autograd_saves(lora, padded):
    """Unpadded, sdpa attends the grouped keys and values as they are; padded, it gets them repeated per query head."""
    shape = SHAPES[1]
    planned = saved_per_token_layer(shape, lora, first_layer=True, masked=padded) + (shape.num_layers - 1) * \
        saved_per_token_layer(shape, lora, masked=padded)
    assert saved_floats_per_token(shape, lora, padded=padded) == planned


def test_chunks_split_only_what_exceeds_the_budget():
    assert rows_per_chunk(10, rows=64, budget=1000) == 64        # all rows fit: one chunk
    assert rows_per_chunk(100, rows=64, budget=1000) == 10
    assert rows_per_chunk(5000, rows=64, budget=1000) == 1       # never fewer than one row


def test_the_offline_default_keeps_every_ppo_pass_in_one_chunk():
    """config/config.yaml's tiny Qwen3 (hidden 128, 4 layers, 1,024 tokens, SFT LoRA r 16 on all seven projections)
    at PPO's 64 rollouts of up to 256 prompt + 80 completion tokens: no pass is split, so its numbers are unchanged."""
    shape = Shape(vocab_size=1024, hidden_size=128, intermediate_size=512, num_layers=4, num_heads=4, num_kv_heads=2,
                  head_dim=32)
    sft, value = Lora(r=16, target_modules=ATTENTION_TARGETS + MLP_TARGETS), Lora(r=16)
    width = 256 + 80
    assert rows_per_chunk(generation_floats(shape, 256, 80), 64) == 64
    assert rows_per_chunk(logprob_pass_floats(shape, width), 64) == 64
    assert rows_per_chunk(ppo_update_floats(shape, sft, value, width, 80), 32) == 32


def real_config(**sections) -> dict:
    config = merged_configs([REPO / "config" / "config.yaml", REPO / "config" / "qwen3-0.6b.yaml"])
    for section, values in sections.items():
        config[section] = {**config.get(section, {}), **values}
    return config


def planned(plans: list[dict], name: str) -> dict:
    return next(plan for plan in plans if plan["stage"] == name)


def test_every_stage_of_the_real_comparison_is_planned_to_fit_a_t4():
    plans = stage_plans(real_config())
    names = [plan["stage"] for plan in plans]
    for expected in ("GRPO full: train step", "GRPO fast: rollouts", "held-out sampling", "pass@k sampling",
                     "token log-probs (k1 vs k3)", "reward model: train step", "DPO (dpo): train step",
                     "PPO (ppo): update", "PPO (ppo): rollouts"):
        assert expected in names
    assert all(plan["fits_t4"] for plan in plans), [(p["stage"], p["peak_gib"]) for p in plans if not p["fits_t4"]]
    checkpointed = planned(plans, "GRPO full: train step")["peak_gib"]
    config = real_config(grpo={"activation_checkpointing": False})  # TRL's default turned off: every layer's activations
    assert planned(stage_plans(config), "GRPO full: train step")["peak_gib"] > 3 * checkpointed
    config = real_config(grpo={"activation_checkpointing": False, "max_completion_length": 1024},  # and twice as long
                         eval={"max_new_tokens": 256})  # (scored at the chapter's budget: sampling sizes stay)
    assert not planned(stage_plans(config), "GRPO full: train step")["fits_t4"]


def test_pass_at_k_is_sized_for_the_card():
    """The offline default's 8 problems x 64 samples per generate call would hold ~28 GiB of float32 KV cache at
    Qwen3-0.6B's shape (8 prompts of 256 tokens held once, 512 completions of 256); the real config's passk.batch_size:
    auto keeps a T4's call within the card."""
    real = planned(stage_plans(real_config()), "pass@k sampling")
    assert real["fits_t4"] and real["pieces_gib"]["kv_cache"] < 13
    offline = planned(stage_plans(real_config(passk={"batch_size": 8})), "pass@k sampling")
    per_token = 28 * 2 * 1024 * 4  # layers x keys and values x kv heads x head dim, float32 (eval.dtype)
    assert not offline["fits_t4"] and offline["pieces_gib"]["kv_cache"] == round((8 + 512) * 256 * per_token / 2 ** 30,
                                                                                 2) == 28.44


def test_the_sampling_plan_counts_the_decode_loops_buffers(tiny_model_dir):
    """The cache the plan counts for a sampling call (``sampling_kv_floats``) is the one the decode loop holds: each
    prompt's keys and values once, each sample's completion pre-allocated to the budget, every layer."""
    import thai_grpo.models.decoding as decoding
    from thai_grpo.models.loading import load_policy

    model = load_policy(tiny_model_dir, None).eval()
    prompts, samples, width, budget = 3, 4, 9, 6
    ids = torch.randint(3, 100, (prompts, width))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding counts: the buffers are as wide as the batch's widest prompt
    held = []

    def counted(model, tokens, cache):
        held.append(sum(t.numel() for t in (*cache.prompt_keys, *cache.prompt_values, *cache.keys, *cache.values)))
        return decoding.decode_step(model, tokens, cache)

    decoding.decode(model, ids, mask, samples, budget, stop_ids=[-1], pad_id=0,
                    choose=lambda scores, rows, column: scores.argmax(-1), step=counted)
    assert held and set(held) == {sampling_kv_floats(Shape.from_config(model.config), prompts, samples, width, budget)}


def decode_steps(plans_config: dict, sizes: dict) -> dict:
    """GRPO's and PPO's generate calls x max new tokens over a run of the real config, at ``sizes``."""
    from thai_grpo.jobs.memory_plan import generation_floats

    grpo, ppo = plans_config["grpo"], plans_config["variants"]["ppo"]["ppo"]
    length = grpo["max_completion_length"]
    grpo_calls = 128 * grpo["num_generations"] // (grpo["per_device_train_batch_size"] *
                                                   grpo["gradient_accumulation_steps"])
    per_call = rows_per_chunk(generation_floats(QWEN3_0_6B, 256, length), ppo["batch_size"],
                              sizes["ppo.chunk_floats"]["ppo"])
    ppo_calls = ppo["max_steps"] * -(-ppo["batch_size"] // per_call)
    return {"grpo": grpo_calls * length, "ppo": ppo_calls * length}


def test_each_card_gets_its_own_sizes_and_each_fits_its_card():
    from thai_grpo.jobs.memory_stages import fits_card
    from thai_grpo_tools.memory_plan import CARDS_GIB, sizes_for_card

    config = real_config()
    assert config["eval"]["batch_size"] == config["passk"]["batch_size"] == "auto"
    t4, large = (sizes_for_card(config, gib) for gib in CARDS_GIB.values())
    assert large["eval.batch_size"] > t4["eval.batch_size"] and large["passk.batch_size"] > t4["passk.batch_size"]
    assert large["ppo.chunk_floats"]["ppo"] > t4["ppo.chunk_floats"]["ppo"]
    for gib in CARDS_GIB.values():
        plans = stage_plans(config, card_gib=gib)
        assert all(fits_card(plan, gib) for plan in plans), [(p["stage"], p["peak_gib"]) for p in plans]
    for sizes, gib in ((t4, CARDS_GIB["T4 16 GB"]), (large, CARDS_GIB["80 GB (A100, H100)"])):  # one more won't fit
        bigger = real_config(eval={"batch_size": sizes["eval.batch_size"] * 2})
        assert not fits_card(planned(stage_plans(bigger, card_gib=gib), "held-out sampling"), gib)
    steps = decode_steps(config, large)
    assert steps["ppo"] <= 2 * steps["grpo"], steps  # an 80 GB card: PPO's rollouts in at most 2x GRPO's decode steps
    assert decode_steps(config, t4)["ppo"] > steps["ppo"]


def test_numbers_set_in_the_config_are_kept_on_every_card():
    from thai_grpo_tools.memory_plan import CARDS_GIB, sizes_for_card

    offline = merged_configs([REPO / "config" / "config.yaml"])
    for gib in CARDS_GIB.values():
        sizes = sizes_for_card(offline, gib)
        assert sizes["eval.batch_size"] == offline["eval"]["batch_size"] == 64
        assert sizes["passk.batch_size"] == offline["passk"]["batch_size"]
        assert set(sizes["ppo.chunk_floats"].values()) == {2 ** 28}  # the dataclass default, not auto


def test_batches_are_evened_out_over_the_calls_they_need():
    from thai_grpo.jobs.memory_stages import balanced_batch

    assert balanced_batch(256, 130) == 128 and balanced_batch(256, 256) == 256 and balanced_batch(256, 1000) == 256
    assert balanced_batch(250, 24) == 23 and -(-250 // 23) == -(-250 // 24)  # as many calls, none larger


def test_a_sampling_job_sizes_auto_for_its_card_or_keeps_its_number(tmp_path):
    import json

    from thai_grpo.jobs.memory_stages import CARD_GIB, sampling_batch_for_card, sampling_sizes

    (tmp_path / "config.json").write_text(json.dumps({
        "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "tie_word_embeddings": True}))
    on_cpu = sampling_sizes("auto", tmp_path, 8, 256, 256, "cpu")
    assert on_cpu["batch_size"] == sampling_batch_for_card(QWEN3_0_6B, 8, 256, 256, CARD_GIB)  # a CPU sizes as a T4
    assert on_cpu["card_gib"] is None and on_cpu["sequences_per_call"] == 8 * on_cpu["batch_size"]
    assert sampling_sizes(5, tmp_path, 8, 256, 256, "cpu")["batch_size"] == 5


def test_a_gpu_job_sizes_auto_for_the_memory_it_may_have_not_the_cards_total(monkeypatch):
    """``card_gib_of``: what is free on the card now, and no more than the job's share when jobs share it
    (``jobs_per_card``: Snakemake's gpu limit over the GPUs present, recorded for the jobs in THAI_GRPO_JOBS_PER_GPU);
    a T4 is planned as torch reports it, 14.75 GiB."""
    import torch

    from thai_grpo.jobs.devices import JOBS_PER_GPU_ENV, jobs_per_card
    from thai_grpo.jobs.memory_stages import jobs_per_gpu
    from thai_grpo.jobs.memory_stages import CARD_GIB, card_gib_of, memory_for_job, sizing_gib

    assert CARD_GIB == 14.75 and sizing_gib("cpu") == CARD_GIB and card_gib_of("cpu") is None
    assert memory_for_job(70.0, 80.0, 1) == 70.0 and memory_for_job(70.0, 80.0, 2) == 40.0
    assert jobs_per_card(None, 1) == 1 and jobs_per_card(2, 1) == 2 and jobs_per_card(3, 2) == 2
    assert jobs_per_card(4, 0) == 1  # no GPU: nothing is shared
    gib = 2 ** 30
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (60 * gib, 80 * gib))
    monkeypatch.setenv(JOBS_PER_GPU_ENV, "1")
    assert jobs_per_gpu() == 1 and card_gib_of("cuda") == 60.0  # what is free, not the card's 80
    monkeypatch.setenv(JOBS_PER_GPU_ENV, "2")
    assert card_gib_of("cuda") == 40.0  # two jobs share the card: half of it each
    monkeypatch.setenv(JOBS_PER_GPU_ENV, "zero")
    assert jobs_per_gpu() == 1
    # capped to a T4's share of the 80 GB card (make gpu-check's T4 pass): sized as a T4
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device=None: CARD_GIB / 80)
    assert card_gib_of("cuda") == CARD_GIB


def test_the_plan_counts_what_each_device_holds():
    """A T4 holds every frozen weight of training in 16 bits (the rollouts included: they sample through them) and
    keeps 16-bit copies of the float32 LoRA under autocast; a CPU holds float32 and does not autocast; the evaluation
    stages (held-out sampling, the token log-probs) are float32 (eval.dtype) on both, and 16-bit on a T4 only when
    eval.dtype says so."""
    gpu, cpu = stage_plans(real_config(), precision=T4), stage_plans(real_config(), precision=CPU)
    weights = base_parameters(QWEN3_0_6B)
    for name in ("GRPO full: train step", "GRPO full: rollouts"):
        assert planned(gpu, name)["pieces_gib"]["weights"] == round(2 * weights / 2 ** 30, 2)
        assert planned(cpu, name)["pieces_gib"]["weights"] == round(4 * weights / 2 ** 30, 2)
    for plans in (gpu, cpu):
        assert planned(plans, "held-out sampling")["pieces_gib"]["weights"] == round(4 * weights / 2 ** 30, 2)
    sixteen = stage_plans(real_config(eval={"dtype": "float16"}), precision=T4)
    assert planned(sixteen, "held-out sampling")["pieces_gib"]["weights"] == round(2 * weights / 2 ** 30, 2)
    assert "autocast_copies" in planned(gpu, "GRPO full: train step")["pieces_gib"]
    assert "autocast_copies" not in planned(cpu, "GRPO full: train step")["pieces_gib"]
    assert planned(gpu, "GRPO full: rollouts")["pieces_gib"]["kv_cache"] * 2 == \
        planned(cpu, "GRPO full: rollouts")["pieces_gib"]["kv_cache"]
    assert planned(gpu, "token log-probs (k1 vs k3)")["pieces_gib"] == planned(cpu, "token log-probs (k1 vs k3)")[
        "pieces_gib"]
    ppo = planned(gpu, "PPO (ppo): update")["pieces_gib"]["weights"]
    assert ppo == round(2 * (2 * weights + 2 * base_parameters(QWEN3_0_6B, "score")) / 2 ** 30, 2)  # 4 frozen bases


def test_dropout_off_in_the_config_is_dropout_off_in_the_plan():
    with_dropout = planned(stage_plans(real_config(grpo={"disable_dropout": False})), "GRPO full: train step")
    without = planned(stage_plans(real_config(grpo={"disable_dropout": True})), "GRPO full: train step")
    assert without["peak_bytes"] < with_dropout["peak_bytes"] and "lora_dropout 0.0" in without["note"]


def test_trls_fused_head_is_counted_as_each_device_runs_it():
    """TRL's fused log-prob head projects a GRPO row's completion positions only (on a GPU by TRL's own compaction,
    on a CPU by thai_grpo.models.cpu.shared_prefix.scoring_labelled_positions_only), not its prompt. On a GPU its
    Triton kernel folds the projection tile in place; on a CPU its torch fallback holds ~8.25 float32 tensors of the
    tile's size beside it (measured by make rehearse-full at Qwen3-0.6B's shape: within 1% for GRPO, RLOO and DPO)."""
    import inspect

    from trl.kernels import chunked_logprob

    assert "def _backward_tile" in inspect.getsource(chunked_logprob)  # the fallback the CPU count describes
    config = real_config(grpo={"per_device_train_batch_size": 4, "max_completion_length": 16})
    for precision, tile_bytes in ((T4, 6), (CPU, 37)):
        step = planned(stage_plans(config, precision=precision, prompt=110), "GRPO full: train step")
        assert step["pieces_gib"]["logits"] == round(4 * 16 * 32768 * tile_bytes / 2 ** 30, 2)  # 4 rows x 16
