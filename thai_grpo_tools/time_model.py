"""What a GPU pass costs: the time plan's cost model (``thai_grpo_tools.time_plan`` applies it). A stage is a list of
GPU passes (decode steps of ``generate`` calls, forward and forward-backward passes), counted as ``Work``:

    seconds = memory x bytes / bandwidth + compute x (FLOPs16 / peak16 + FLOPs32 / peak32)
              + launch[host] x host ops + launch_train[host] x host ops of training passes
              + trainer_run x trainer runs + fused_head_compile x compiles + JOB_START_S x jobs

with the card's datasheet bandwidth and peaks (``Card``) and the factors ``fit`` finds by least squares on relative
errors (``Costs``). Bytes: the weights once per pass (a backward and a recomputed forward read them again), the
activations per token and layer (``ACTIVATION_BYTES``), per decode step the KV cache each row attends over (and with
transformers' DynamicCache a copy of the whole cache), the vocabulary-wide tensors of each scored position. FLOPs:
2 x parameters per token, 4 x heads x head_dim x context per token and layer for attention, a backward one forward
more (the frozen base gets no weight gradient). Host ops: the operators a pass dispatches (``HOST_OPS``), each a
kernel launch; those of training passes apart, as autograd records each. The terms are added as if the host never
ran ahead of the GPU: where they overlap the sum is an upper bound. ``Sampler`` says how a ``generate`` call works:
the records' code (``HF_GENERATE``, TRL's ``TRL_GENERATE``), the decode loop (``DECODE_LOOP``: its step's operators
counted, whatever the rows) or its steps replayed as CUDA graphs (``GRAPHED_LOOP``, ``eval.cuda_graphs``).
"""

from __future__ import annotations

import dataclasses

from thai_grpo.jobs.memory_plan import Shape, base_parameters, kv_cache_floats, layer_parameters

JOB_START_S = 20.0  # assumed: a job's imports, CUDA start and model loading from a local disk
BYTES = {"float32": 4, "16-bit": 2}


@dataclasses.dataclass(frozen=True)
class Card:
    """A GPU's datasheet: memory as torch reports it (GiB), bandwidth (bytes/s), dense FLOP/s in 16 bits and in
    float32 (TF32 off), and the host that launches its kernels."""
    name: str
    memory_gib: float
    bandwidth: float
    flops_16: float
    flops_32: float
    host: str = "server"


T4 = Card("T4", 14.75, 320e9, 65e12, 8.1e12, host="the chapter's T4 machine")
A100 = Card("A100 80GB", 79.1, 2.0e12, 312e12, 19.5e12)
H100 = Card("H100-class", 79.1, 3.35e12, 989e12, 67e12)
H200 = Card("H200", 139.8, 4.8e12, 989e12, 67e12)

# Non-view aten operators one pass dispatches at Qwen3-0.6B's 28 layers, each a kernel launch on a GPU; counted with a
# TorchDispatchMode on a 28-layer stand-in (tests/test_time_model.py counts them again). LoRA: on the attention
# projections, float32 on 16-bit frozen weights, as a GPU holds them.
HOST_OPS = {
    "decode": 1393,  # a decode step of the merged model (held-out sampling, pass@k, preference pairs)
    "decode_lora": 2294,  # a decode step through the LoRA policy (GRPO's and PPO's rollouts)
    "forward": 1539,  # a forward pass without LoRA (the references, the prompt's prefill)
    "forward_lora": 2435,  # a forward pass through LoRA under autocast (log-prob passes, values, reward scores)
    "train_lora": 6007,  # a forward-backward through LoRA under autocast
    "train_lora_checkpointed": 8391,  # the same with activation checkpointing (the forward recomputed)
    "decode_loop": 1743,  # a step of the decode loop on the merged model, its draw and output included
    "decode_lora_loop": 2701,  # the same through the LoRA policy (PPO's rollouts)
    "outside_graph": 69,  # the decode loop's operators outside a step replayed as a CUDA graph (the draw, the output)
}
NOISE_OPS_PER_ROW = 1  # the records' per-row seeded sampling (a generator per row): one uniform draw per row and step
KL_OPS_PER_COMPLETION = 60  # the k1-vs-k3 stage's exact KL of one completion (position_kl) and its gathers

# Bytes all kernels of a decoder layer read and write per token in a forward pass, the weights apart (counted like
# HOST_OPS at Qwen3-0.6B's widths; RMSNorm works in float32 whatever the dtype). A forward-backward through LoRA under
# autocast moves TRAIN_TRAFFIC times a forward's, a recomputed forward RECOMPUTE_TRAFFIC times more.
ACTIVATION_BYTES = {"float32": 468_656, "16-bit": 347_312}
TRAIN_TRAFFIC, RECOMPUTE_TRAFFIC = 3.9, 1.4
# Per scored position and vocabulary entry: TRL's fused head writes and reads float32 tiles of the projection (a
# backward recomputes the tile and writes its gradient); a full log-softmax writes the 16-bit logits, their float32
# copy, / temperature and the log-softmax (PPO's update adds the entropy's exp, product and sum, and the backward as
# much again); the k1-vs-k3 stage's float32 log-softmax, then per completion its exact KL in float64 (~25 passes).
LOGIT_BYTES = {"fused": 8, "fused_train": 8 + 16, "full": 28, "full_train": 52 + 30, "full32": 16, "none": 0}
KL_BYTES = 25 * 2 * 8
# Per decode step, row and vocabulary entry: the last position's logits processed and sampled in float32; the records'
# per-row Gumbel noise adds its draw, its five in-place passes and its sum with the scores; the decode loop's
# inverse-CDF draw its softmax (three reads, a write), a float64 copy, its in-place cumulative sum, the greedy argmax.
SAMPLING_BYTES = {"plain": 16, "noise": 16 + 4 + 5 * 8 + 12, "inverse_cdf": 16 + 16 + 12 + 16 + 4}


@dataclasses.dataclass(frozen=True)
class Sampler:
    """How a ``generate`` call works: ``preallocated_cache`` (else DynamicCache copies the whole cache every step),
    ``shared_prompt_kv`` (each prompt's KV held and read once per step for its samples), ``finished_rows_stop`` (else
    every row decodes to the call's last step), ``prefill_per_problem`` (each distinct prompt's forward pass once),
    ``noise_per_row`` (per-row seeded sampling), ``step_ops`` (a step's ``HOST_OPS``: ``generate``'s, the decode
    loop's, or ``graphed``: one replay and what runs outside it), ``greedy_in_pass`` (a problem's greedy answer one
    more row of its sampling call; else greedy calls of their own, batch x samples problems each)."""
    preallocated_cache: bool
    shared_prompt_kv: bool
    finished_rows_stop: bool
    prefill_per_problem: bool
    noise_per_row: bool
    step_ops: str = "generate"
    greedy_in_pass: bool = False


TRL_GENERATE = Sampler(False, False, False, False, False)  # GRPO's and RLOO's rollouts: TRL's model.generate
HF_GENERATE = Sampler(False, False, False, True, True)  # held-out, pass@k, pairs and PPO's rollouts in the records
DECODE_LOOP = Sampler(True, True, False, True, False, "loop", True)  # the same stages now (thai_grpo.models.decoding)
GRAPHED_LOOP = dataclasses.replace(DECODE_LOOP, step_ops="graphed")  # with eval.cuda_graphs


@dataclasses.dataclass(frozen=True)
class Work:
    """A stage's counts: bytes, FLOPs in 16 and 32 bits, host ops outside and inside training passes, decode steps,
    trainer runs, compiles of TRL's fused head, jobs."""
    bytes: float = 0.0
    flops_16: float = 0.0
    flops_32: float = 0.0
    ops: float = 0.0
    train_ops: float = 0.0
    decode_steps: int = 0
    trainer_runs: int = 0
    fused_head_compiles: int = 0
    jobs: int = 0

    def __add__(self, other: "Work") -> "Work":
        return Work(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))

    def __mul__(self, times: int) -> "Work":
        return Work(*(value * times for value in dataclasses.astuple(self)))


def total(works) -> Work:
    return sum(works, Work())


def flops(amount: float, dtype: str) -> Work:
    return Work(flops_32=amount) if dtype == "float32" else Work(flops_16=amount)


def chunk_sizes(rows: int, per_chunk: int) -> list[int]:
    return [min(per_chunk, rows - start) for start in range(0, rows, per_chunk)]


# ----------------------------------------------------------------------------------------- passes
def body_parameters(shape: Shape) -> int:
    """The decoder layers' parameters, which every token goes through (the LM head apart)."""
    return shape.num_layers * layer_parameters(shape)


def head_parameters(shape: Shape) -> int:
    return shape.vocab_size * shape.hidden_size


def attention_flops(shape: Shape, context_sum: float) -> float:
    """QK^T and AV of every layer, summed over (query, key) pairs: 4 x heads x head_dim per pair and layer."""
    return 4 * shape.q_dim * shape.num_layers * context_sum


def forward_pass(shape: Shape, dtype: str, rows: int, width: int, scored: int, ops: str, logits: str = "fused",
                 head: str = "lm", train: bool = False, checkpointing: bool = False) -> Work:
    """One pass over ``rows`` x ``width`` tokens whose last ``scored`` positions go through the LM head (``score``: a
    one-output head); ``train``: forward and backward; ``checkpointing``: the forward recomputed in the backward."""
    forwards = 1 + train + (train and checkpointing)
    traffic = (TRAIN_TRAFFIC + checkpointing * RECOMPUTE_TRAFFIC) if train else 1
    tokens = rows * width
    head_flops = 2 * head_parameters(shape) * rows * scored if head == "lm" else 0
    amount = 2 * body_parameters(shape) * tokens + head_flops + attention_flops(shape, rows * width ** 2 / 2)
    moved = forwards * base_parameters(shape, head) * BYTES[dtype] + traffic * tokens * shape.num_layers * \
        ACTIVATION_BYTES[dtype] + rows * scored * shape.vocab_size * LOGIT_BYTES[logits]
    launched = Work(train_ops=HOST_OPS[ops]) if train else Work(ops=HOST_OPS[ops])
    return launched + Work(bytes=moved) + flops(forwards * amount, dtype)


def generate_call(shape: Shape, dtype: str, sampler: Sampler, problems: int, samples: int, prompt: int,
                  lengths: list[int], ops: str) -> Work:
    """One ``generate`` call on ``problems`` prompts of ``prompt`` tokens, ``samples`` rows each, with the rows'
    completion ``lengths``: the prompts' forward pass, then one decode step per token of the longest row. A step reads
    the weights, each computed row's activations and the KV cache it attends over, and dispatches ``HOST_OPS[ops]``."""
    rows, steps = problems * samples, max(lengths)
    decoded = lengths if sampler.finished_rows_stop else [steps] * rows  # the steps each row is computed for
    row_steps = sum(decoded)
    completion_context = sum(n * (n - 1) / 2 for n in decoded)  # a row attends to its own tokens so far ...
    prompt_context = prompt * row_steps  # ... and to its prompt
    kv_token = kv_cache_floats(shape, 1, 1) * BYTES[dtype]
    prompt_reads = problems * prompt * steps if sampler.shared_prompt_kv else prompt_context
    cache_copies = 0 if sampler.preallocated_cache else 2 * (prompt_context + completion_context)
    sampling = SAMPLING_BYTES["noise" if sampler.noise_per_row else "plain" if sampler.step_ops == "generate" else
                              "inverse_cdf"]
    moved = steps * base_parameters(shape) * BYTES[dtype] + row_steps * shape.num_layers * ACTIVATION_BYTES[dtype] \
        + (prompt_reads + completion_context + cache_copies) * kv_token + row_steps * shape.vocab_size * sampling
    amount = 2 * (body_parameters(shape) + head_parameters(shape)) * row_steps + \
        attention_flops(shape, prompt_context + completion_context)
    per_step = {"generate": HOST_OPS[ops], "loop": HOST_OPS.get(f"{ops}_loop"),
                "graphed": 1 + HOST_OPS["outside_graph"]}[sampler.step_ops]
    launched = steps * per_step + (row_steps * NOISE_OPS_PER_ROW if sampler.noise_per_row else 0)
    prefill = forward_pass(shape, dtype, problems if sampler.prefill_per_problem else rows, prompt, 1, "forward")
    return prefill + Work(bytes=moved, ops=launched, decode_steps=steps) + flops(amount, dtype)


def sampling_job(shape: Shape, dtype: str, sampler: Sampler, problems: int, samples: int, batch: int, prompt: int,
                 length: int, greedy: bool = False) -> Work:
    """``sampling.sample_heldout`` (``greedy``: with a greedy answer per problem) or the preference pairs' sampling:
    ``batch`` problems x ``samples`` per call, each completion ``length`` tokens; the greedy answers rows of those
    calls, or (as recorded) calls of their own of batch x samples problems."""
    rows = samples + (greedy and sampler.greedy_in_pass)
    work = total(generate_call(shape, dtype, sampler, size, rows, prompt, [length] * size * rows, "decode")
                 for size in chunk_sizes(problems, batch))
    if greedy and not sampler.greedy_in_pass:
        plain = dataclasses.replace(sampler, noise_per_row=False)  # greedy decoding draws no noise
        work += total(generate_call(shape, dtype, plain, size, 1, prompt, [length] * size, "decode")
                      for size in chunk_sizes(problems, batch * samples))
    return work


# ----------------------------------------------------------------------------------------- costs and their fit
@dataclasses.dataclass(frozen=True)
class Costs:
    """The fitted factors: ``memory`` and ``compute`` (1 / the share reached of the datasheet's bandwidth and peak),
    seconds per host op and per host op of a training pass for each host, per trainer run and per fused-head compile."""
    memory: float
    compute: float
    launch: dict
    launch_train: dict
    trainer_run: float
    fused_head_compile: float


def terms(work: Work, card: Card) -> dict:
    """A work's counts as the fit's columns: seconds at the datasheet's bandwidth and peaks, then plain counts."""
    return {"memory": work.bytes / card.bandwidth, "compute": work.flops_16 / card.flops_16 +
            work.flops_32 / card.flops_32, "ops": work.ops, "train_ops": work.train_ops,
            "trainer_runs": work.trainer_runs, "compiles": work.fused_head_compiles}


def breakdown(work: Work, card: Card, costs: Costs) -> dict:
    """Seconds per term: GPU memory traffic, compute, host launches, one-offs (trainer runs, compiles, job starts)."""
    t = terms(work, card)
    return {"memory": costs.memory * t["memory"], "compute": costs.compute * t["compute"],
            "host": costs.launch[card.host] * t["ops"] + costs.launch_train[card.host] * t["train_ops"],
            "one-offs": costs.trainer_run * t["trainer_runs"] + costs.fused_head_compile * t["compiles"] +
            JOB_START_S * work.jobs}


def seconds(work: Work, card: Card, costs: Costs) -> float:
    return sum(breakdown(work, card, costs).values())


def fit(measured: list[dict], other_host: list[dict]) -> Costs:
    """Least squares on relative errors: ``measured`` (rows with ``work``, ``card``, ``measured_s``, one host) fix
    ``memory`` and ``compute`` (>= 1: no faster than the datasheet), that host's launch costs, the trainer run and the
    compile; then ``other_host``'s rows fix its launch cost, training ops costing as many times more as on the first."""
    import numpy as np
    from scipy.optimize import lsq_linear

    names = ("memory", "compute", "ops", "train_ops", "trainer_runs", "compiles")
    columns = np.array([[terms(row["work"], row["card"])[name] for name in names] for row in measured])
    target = np.array([row["measured_s"] for row in measured])
    bounds = ([1, 1, 0, 0, 0, 0], [np.inf] * len(names))
    memory, compute, launch, launch_train, run, compile_s = lsq_linear(columns / target[:, None], np.ones(len(target)),
                                                                       bounds=bounds).x
    host, other = measured[0]["card"].host, other_host[0]["card"].host
    ratio = launch_train / launch
    first = Costs(float(memory), float(compute), {host: float(launch), other: 0.0},
                  {host: float(launch_train), other: 0.0}, float(run), float(compile_s))
    fixed = np.array([seconds(row["work"], row["card"], first) for row in other_host])
    ops = np.array([row["work"].ops + ratio * row["work"].train_ops for row in other_host])
    target = np.array([row["measured_s"] for row in other_host])
    x, y = ops / target, (target - fixed) / target
    per_op = float(x @ y / (x @ x))
    return dataclasses.replace(first, launch={**first.launch, other: per_op},
                               launch_train={**first.launch_train, other: per_op * ratio})
