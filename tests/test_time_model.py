"""The time plan's cost model (thai_grpo_tools.time_model): its counts of bytes, FLOPs and host ops against values
worked out by hand on a tiny shape, the sampler switch, the fit against costs it must recover, and its counted
constants against a dispatch counter run on stand-ins with Qwen3-0.6B's layers and widths."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from thai_grpo.jobs.memory_plan import Shape, layer_parameters
from thai_grpo_tools import time_model as tm
from thai_grpo_tools.memory_plan import QWEN3_0_6B

# 2 layers, hidden 4, intermediate 8, 2 heads of 2, 1 KV head: a layer's projections 16 + 8 + 8 + 16 + 3 x 32 = 144
# parameters, its norms 2 x 2 + 2 x 4: 156 a layer, 312 in the body; the head 10 x 4 = 40.
TINY = Shape(vocab_size=10, hidden_size=4, intermediate_size=8, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=2)


def test_the_tiny_shape_has_the_parameters_counted_by_hand():
    assert (layer_parameters(TINY), tm.body_parameters(TINY), tm.head_parameters(TINY)) == (156, 312, 40)


def test_a_forward_pass_costs_two_flops_per_parameter_and_token_and_a_backward_one_forward_more():
    forward = tm.forward_pass(TINY, "16-bit", rows=3, width=5, scored=2, ops="forward")
    # body 2 x 312 x 15 tokens, LM head 2 x 40 x 3 rows x 2 scored, attention 4 x q_dim 4 x 2 layers x 3 x 25 / 2
    assert forward.flops_16 == 9360 + 480 + 1200 and forward.flops_32 == 0
    # weights (embedding 40 + body 312 + final norm 4) in 2 bytes, activations, 3 x 2 scored positions x 10 x 8 bytes
    assert forward.bytes == 356 * 2 + 15 * 2 * tm.ACTIVATION_BYTES["16-bit"] + 6 * 10 * tm.LOGIT_BYTES["fused"]
    assert (forward.ops, forward.train_ops) == (tm.HOST_OPS["forward"], 0)
    train = tm.forward_pass(TINY, "float32", 3, 5, 2, "train_lora", train=True)
    checkpointed = tm.forward_pass(TINY, "float32", 3, 5, 2, "train_lora_checkpointed", train=True, checkpointing=True)
    assert train.flops_32 == 2 * 11040 and checkpointed.flops_32 == 3 * 11040  # frozen base: no weight gradients
    assert (train.ops, train.train_ops) == (0, tm.HOST_OPS["train_lora"])
    score = tm.forward_pass(TINY, "16-bit", 3, 5, 0, "forward", "none", head="score")
    assert score.flops_16 == 9360 + 1200


def test_the_new_sampler_reads_each_prompt_once_and_copies_no_cache():
    """2 problems x 3 samples, prompts of 4 tokens, 3 decode steps; a KV token is 2 layers x (K, V) x 2 floats x 2
    bytes = 16 bytes. Today each of the 6 rows reads its prompt and its tokens so far at every step (6 x 3 x 4 +
    6 x (0 + 1 + 2) = 72 + 18 tokens) and DynamicCache's torch.cat reads and writes them again (2 x 90); the new
    sampler reads each problem's prompt once a step (2 x 4 x 3 = 24) and the rows' 18 tokens, and copies nothing. Its
    draw moves ``inverse_cdf`` bytes per row, step and token instead of the per-row noise's, and its step dispatches
    the decode loop's counted operators, whatever the rows, instead of ``generate``'s and one per row."""
    call = dict(shape=TINY, dtype="16-bit", problems=2, samples=3, prompt=4, lengths=[3] * 6, ops="decode")
    today, new = tm.generate_call(sampler=tm.HF_GENERATE, **call), tm.generate_call(sampler=tm.DECODE_LOOP, **call)
    drawn = 18 * 10 * (tm.SAMPLING_BYTES["noise"] - tm.SAMPLING_BYTES["inverse_cdf"])
    assert today.bytes - new.bytes == (90 + 180 - 42) * 16 + drawn
    assert (today.flops_16, today.decode_steps) == (new.flops_16, new.decode_steps)
    assert today.decode_steps == 3 and today.ops == tm.HOST_OPS["forward"] + 3 * tm.HOST_OPS["decode"] + 18
    assert new.ops == tm.HOST_OPS["forward"] + 3 * tm.HOST_OPS["decode_loop"]
    graphed = tm.generate_call(sampler=tm.GRAPHED_LOOP, **call)
    assert graphed.ops == tm.HOST_OPS["forward"] + 3 * (1 + tm.HOST_OPS["outside_graph"])


def test_finished_rows_stop_only_where_rows_are_shorter_than_the_call():
    full, stopping = tm.DECODE_LOOP, dataclasses.replace(tm.DECODE_LOOP, finished_rows_stop=True)
    call = dict(shape=TINY, dtype="float32", problems=1, samples=2, prompt=4, ops="decode")
    assert tm.generate_call(sampler=full, lengths=[3, 3], **call) == tm.generate_call(sampler=stopping, lengths=[3, 3],
                                                                                       **call)
    everyone, finished = (tm.generate_call(sampler=s, lengths=[1, 3], **call) for s in (full, stopping))
    assert everyone.decode_steps == finished.decode_steps == 3  # the call still runs to its longest row
    per_row_step = 2 * (312 + 40)  # the stopped row's 2 steps no longer computed (attention apart)
    assert everyone.flops_32 - finished.flops_32 == pytest.approx(2 * per_row_step + 4 * 4 * 2 * (2 * 4 + 1 + 2))


def test_a_sampling_job_makes_the_calls_of_sample_heldout():
    """10 problems x 3 samples, 4 problems a call, 7 tokens: the records' code sampled 4 + 4 + 2 problems, then made
    one greedy call of up to 12; the decode loop's calls hold the greedy answers as one more row per problem."""
    recorded = tm.sampling_job(TINY, "float32", tm.HF_GENERATE, problems=10, samples=3, batch=4, prompt=4, length=7,
                               greedy=True)
    assert recorded.decode_steps == (3 + 1) * 7
    assert tm.sampling_job(TINY, "float32", tm.HF_GENERATE, 10, 3, 4, 4, 7).decode_steps == 3 * 7
    now = tm.sampling_job(TINY, "float32", tm.DECODE_LOOP, 10, 3, 4, 4, 7, greedy=True)
    assert now.decode_steps == 3 * 7
    assert now == tm.sampling_job(TINY, "float32", dataclasses.replace(tm.DECODE_LOOP, greedy_in_pass=False), 10, 4,
                                  4, 4, 7)  # as if each problem had 4 samples


def test_seconds_add_the_terms_at_the_cards_datasheet():
    card = tm.Card("card", 10, bandwidth=100.0, flops_16=1000.0, flops_32=10.0)
    costs = tm.Costs(memory=2.0, compute=4.0, launch={"server": 0.1}, launch_train={"server": 0.3}, trainer_run=5.0,
                     fused_head_compile=7.0)
    work = tm.Work(bytes=50, flops_16=500, flops_32=5, ops=10, train_ops=1, trainer_runs=1, fused_head_compiles=1,
                   jobs=2)
    assert tm.breakdown(work, card, costs) == pytest.approx(
        {"memory": 1.0, "compute": 4.0, "host": 1.3, "one-offs": 12.0 + 2 * tm.JOB_START_S})
    assert tm.seconds(work, card, costs) == pytest.approx(18.3 + 2 * tm.JOB_START_S)


def test_the_fit_recovers_the_costs_that_made_its_measurements():
    true = tm.Costs(memory=1.25, compute=2.0, launch={"server": 2e-5, tm.T4.host: 6e-5},
                    launch_train={"server": 4e-5, tm.T4.host: 12e-5}, trainer_run=3.0, fused_head_compile=5.0)
    works = [tm.Work(bytes=4.8e12 * a, flops_16=989e12 * b, ops=c, train_ops=d, trainer_runs=e, fused_head_compiles=f)
             for a, b, c, d, e, f in [(1, 0, 1e5, 0, 0, 0), (0, 1, 0, 1e5, 1, 0), (2, 1, 5e5, 1e4, 1, 1),
                                      (0.1, 3, 1e4, 2e5, 1, 0), (1, 1, 1e6, 0, 0, 1), (3, 0.2, 2e5, 3e5, 1, 0),
                                      (0.5, 0.5, 4e5, 4e5, 1, 1)]]
    server = [{"work": w, "card": tm.H200, "measured_s": tm.seconds(w, tm.H200, true)} for w in works]
    t4 = [{"work": w + tm.Work(jobs=1), "card": tm.T4, "measured_s": tm.seconds(w + tm.Work(jobs=1), tm.T4, true)}
          for w in works[2:4]]
    fitted = tm.fit(server, t4)
    assert (fitted.memory, fitted.compute, fitted.trainer_run, fitted.fused_head_compile) == pytest.approx(
        (1.25, 2.0, 3.0, 5.0), rel=1e-4)
    for host in ("server", tm.T4.host):
        assert fitted.launch[host] == pytest.approx(true.launch[host], rel=1e-4)
        assert fitted.launch_train[host] == pytest.approx(true.launch_train[host], rel=1e-4)


# ---- the counted constants, counted again --------------------------------------------------------------------------

VIEWS = {"view", "_unsafe_view", "transpose", "expand", "slice", "select", "unsqueeze", "squeeze", "as_strided",
         "permute", "t", "alias", "detach", "unbind", "split", "split_with_sizes", "lift_fresh"}


def nbytes(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    return sum(map(nbytes, value)) if isinstance(value, (list, tuple)) else 0


class Dispatched(TorchDispatchMode):
    """The non-view aten operators dispatched (each a kernel launch on a GPU) and the bytes of their tensor
    arguments and results."""

    def __init__(self):
        super().__init__()
        self.ops, self.bytes = 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket.__name__ not in VIEWS:
            self.ops += 1
            self.bytes += nbytes(args) + nbytes(list((kwargs or {}).values())) + nbytes(out)
        return out


def standin(layers: int, widths: bool = False, dtype=torch.float32, lora: bool = False):
    """Qwen3 with ``layers`` layers, Qwen3-0.6B's heads and (``widths``) widths, a small vocabulary; ``lora``: LoRA
    on the attention projections in float32 on the ``dtype`` weights, as a GPU holds them."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    s = QWEN3_0_6B
    widths = dict(hidden_size=s.hidden_size, intermediate_size=s.intermediate_size, head_dim=s.head_dim) if widths \
        else dict(hidden_size=64, intermediate_size=128, head_dim=4)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=1000, num_hidden_layers=layers, num_attention_heads=s.num_heads,
                                         num_key_value_heads=s.num_kv_heads, tie_word_embeddings=True, **widths))
    model = model.to(dtype)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.data = parameter.data.float()
    return model


class PerRowNoise:
    """The records' sampler: greedy over scores plus Gumbel noise drawn by each row's own generator (one uniform_ per
    row and step), as the code that made the `make gpu-check` records sampled."""

    def __init__(self, rows: int):
        self.generators = [torch.Generator().manual_seed(row) for row in range(rows)]

    def __call__(self, input_ids, scores):
        noise = torch.empty(scores.shape)
        for row, generator in zip(noise, self.generators):
            row.uniform_(generator=generator)
        return noise.clamp_(min=1e-38).log_().neg_().log_().neg_().add_(scores)


def decode_step_ops(model, rows: int = 4, noise: bool = False) -> float:
    """Operators per decode step of ``generate``: two calls' difference over their extra steps."""
    from transformers import GenerationConfig

    ids = torch.randint(1, 1000, (rows, 12))

    def generate(steps: int) -> int:
        config = GenerationConfig(do_sample=False, max_new_tokens=steps, min_new_tokens=steps, pad_token_id=0,
                                  eos_token_id=999)
        with Dispatched() as counted, torch.no_grad():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config,
                           logits_processor=[PerRowNoise(rows)] if noise else [])
        return counted.ops

    return (generate(6) - generate(2)) / 4


def loop_step_ops(model, prompts: int = 2, samples: int = 4, outside_only: bool = False) -> float:
    """Operators per step of the decode loop (``decoding.decode``, sampled at temperature 1, no row stopping): two
    calls' difference over their extra steps; ``outside_only``: those outside its ``decode_step`` (the step replaced
    by one that dispatches nothing), what a CUDA graph of the step leaves to the host."""
    from thai_grpo.models.decoding import decode, decode_step
    from thai_grpo.models.sampling import CounterSampler, row_seeds

    ids = torch.randint(1, 1000, (prompts, 12))
    logits = torch.zeros(prompts * samples, 1000)
    step = (lambda model, tokens, cache: logits) if outside_only else decode_step

    def run(budget: int) -> int:
        sampler = CounterSampler(1.0, row_seeds(0, range(prompts), samples), "cpu")
        with Dispatched() as counted, torch.no_grad():
            decode(model, ids, torch.ones_like(ids), samples, budget, [-1], 0, sampler.choose, step=step)
        return counted.ops

    run(2)  # warm
    return (run(17) - run(1)) / 16


def one_pass(model, train: bool = False, checkpointing: bool = False, autocast: bool = False) -> Dispatched:
    """A pass over 2 rows of 128 tokens (the last position scored), with its backward when ``train``."""
    ids = torch.randint(1, 1000, (2, 128))
    if checkpointing:
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model.train(train)
    with Dispatched() as counted:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast), torch.set_grad_enabled(train):
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False, logits_to_keep=1).logits
        if train:
            logits.float().sum().backward()
    return counted


def test_host_ops_are_what_a_28_layer_stand_in_dispatches():
    bf16 = torch.bfloat16
    counted = {"decode": decode_step_ops(standin(28)),
               "decode_lora": decode_step_ops(standin(28, dtype=bf16, lora=True)),
               "forward": one_pass(standin(28, dtype=bf16)).ops,
               "forward_lora": one_pass(standin(28, dtype=bf16, lora=True), autocast=True).ops,
               "train_lora": one_pass(standin(28, dtype=bf16, lora=True), train=True, autocast=True).ops,
               "train_lora_checkpointed": one_pass(standin(28, dtype=bf16, lora=True), train=True, checkpointing=True,
                                                   autocast=True).ops}
    counted.update({"decode_loop": loop_step_ops(standin(28)),
                    "decode_lora_loop": loop_step_ops(standin(28, dtype=bf16, lora=True)),
                    "outside_graph": loop_step_ops(standin(28), outside_only=True)})
    assert counted == pytest.approx(tm.HOST_OPS, rel=0.05)
    per_row = (decode_step_ops(standin(28), rows=8, noise=True) - decode_step_ops(standin(28), rows=4, noise=True)) / 4
    assert per_row == tm.NOISE_OPS_PER_ROW
    assert loop_step_ops(standin(28), prompts=8) == counted["decode_loop"]  # the loop's step: whatever the rows


def test_activation_traffic_is_what_a_layer_of_qwen3_0_6b_moves():
    """Per token and layer: the bytes of a 2-layer pass less a 1-layer one's, the layer's weights (read once by its
    matmuls, twice with a backward pass) apart."""
    def per_token_layer(dtype, weight_bytes: int, **pass_kwargs) -> float:
        lora = pass_kwargs.pop("lora", False)
        one, two = (one_pass(standin(n, True, dtype, lora), **pass_kwargs).bytes for n in (1, 2))
        reads = 2 if pass_kwargs.get("train") else 1
        return (two - one - reads * layer_parameters(QWEN3_0_6B) * weight_bytes) / 256

    forward = {"float32": per_token_layer(torch.float32, 4), "16-bit": per_token_layer(torch.bfloat16, 2)}
    assert forward == pytest.approx(tm.ACTIVATION_BYTES, rel=0.05)
    train = per_token_layer(torch.bfloat16, 2, lora=True, train=True, autocast=True)
    lora_forward = per_token_layer(torch.bfloat16, 2, lora=True, autocast=True)
    assert train / forward["16-bit"] == pytest.approx(tm.TRAIN_TRAFFIC, rel=0.1)
    assert lora_forward / forward["16-bit"] == pytest.approx(tm.RECOMPUTE_TRAFFIC, rel=0.1)
