"""The memory plan's stages: a stage of a run as the sum of ``memory_plan``'s pieces, in the bytes the device holds
them in (``Precision``), with the verdict against a 16 GB T4; and the sizes a job chooses from them.

Sized to the card: ``eval.batch_size``, ``passk.batch_size`` and ``ppo.chunk_floats`` may be ``auto``, chosen by a job
from the memory it may have of its GPU (``card_gib_of``: free memory, and its share when jobs share the card;
``sampling_sizes``, ``ppo_chunk_floats_for_card``: the largest sizes whose stages this plan fits in it); a CPU job
sizes as a T4 would. A size changes how much work one call does, never a sample
(``thai_grpo.models.sampling``). The whole real-config run's plan is in ``thai_grpo_tools.stage_plans``.
"""

from __future__ import annotations

import dataclasses

from thai_grpo.jobs.memory_plan import (
    GIB, Lora, Shape, base_parameters, chunks, generation_floats, logprob_pass_floats, lora_parameters,
    lora_state_bytes, norm_floats_per_token_layer, ppo_update_floats, rows_per_chunk, sampling_kv_floats,
    saved_per_token_layer,
)

# What a 16 GB T4 leaves to tensors: torch reports 14.75 GiB of total memory (torch.cuda.get_device_properties and
# mem_get_info on a T4), less ~0.5 GiB for the CUDA context and kernels and ~1 GiB of allocator slack: a stage "fits"
# when its predicted peak is within CARD_GIB - RESERVE_GIB.
CARD_GIB, RESERVE_GIB = 14.75, 1.5
AUTO = "auto"
PROMPT_TOKENS = 256  # the chapter's max_prompt_length: an upper bound for the system prompt, question and template


@dataclasses.dataclass(frozen=True)
class Precision:
    """How many bytes a device spends per frozen weight and per activation (KV cache, matmul outputs), whether the
    trained float32 weights are autocast to 16-bit copies, and per entry of a tile of TRL's fused log-prob head."""
    device: str
    frozen_bytes: int
    compute_bytes: int
    autocast: bool
    head_tile_bytes: float


# TRL's fused head on a GPU: the projection tile at the compute dtype, folded in place by its Triton kernel (+ its
# float32 view); on a CPU its torch fallback (trl.kernels.chunked_logprob._backward_tile) holds the tile and ~8.25
# float32 tensors of its size at once (the scaled and tempered logits, log-probs, probabilities, the gradient, the
# target mask and its float copy, their difference and product): measured at Qwen3-0.6B's shape by make rehearse-full.
T4 = Precision("a 16 GB T4 (float16 weights and autocast)", 2, 2, True, 2 + 4)
CPU = Precision("a CPU (float32, no autocast)", 4, 4, False, 4 + 8.25 * 4)
# Every evaluation stage on any device: eval.dtype (float32 by default: 16 bits would round away the chapter's update).
FLOAT32_EVALUATION = Precision("float32 evaluation (eval.dtype)", 4, 4, False, 4 + 4)


def activation_bytes(shape: Shape, lora: Lora | None, tokens: int, compute_bytes: int,
                     checkpointing: bool = False) -> int:
    """Saved activations in bytes: RMSNorm's part in float32 (it normalises a float32 copy of its input), the rest at
    ``compute_bytes`` (4, or 2 with 16-bit weights or autocast). With activation checkpointing each layer's input is
    kept (the residual stream, at ``compute_bytes``), plus one layer's saved tensors while it is recomputed."""
    per_layer = saved_per_token_layer(shape, lora)
    norms = norm_floats_per_token_layer(shape)
    layer_bytes = norms * 4 + (per_layer - norms) * compute_bytes
    if checkpointing:
        return tokens * (shape.num_layers * shape.hidden_size * compute_bytes + layer_bytes)
    return tokens * shape.num_layers * layer_bytes


def logits_bytes(shape: Shape, width: int, scored: int, compute_bytes: int) -> int:
    """Per row, a log-prob pass over ``width`` positions whose last ``scored`` are scored: the full-vocabulary logits
    (``compute_bytes``), then in float32 the scored positions' logits / T and their log-softmax, plus the float32 copy
    of those logits when they are 16-bit."""
    return shape.vocab_size * (width * compute_bytes + (2 if compute_bytes == 4 else 3) * scored * 4)


def gib(value: float) -> float:
    return round(value / GIB, 2)


def stage(name: str, pieces: dict, note: str) -> dict:
    """A stage's pieces (bytes), their sum and the verdict for a 16 GB T4."""
    peak = sum(pieces.values())
    fits = peak / GIB <= CARD_GIB - RESERVE_GIB
    return {"stage": name, "pieces_gib": {key: gib(value) for key, value in pieces.items()}, "peak_gib": gib(peak),
            "peak_bytes": peak, "verdict": "fits a 16 GB T4" if fits else f"needs more: {gib(peak) + RESERVE_GIB:.0f}+ "
            "GiB card", "fits_t4": fits, "note": note}


def trained_bytes(shape: Shape, lora: Lora, precision: Precision, head_params: int = 0) -> dict:
    """The trained float32 parameters with their gradients and AdamW states, and under autocast their 16-bit copies
    (kept for the backward pass)."""
    pieces = {"lora_and_adamw": lora_state_bytes(shape, lora, head_params)}
    if precision.autocast:
        pieces["autocast_copies"] = 2 * (lora_parameters(shape, lora) + head_params)
    return pieces


def sampling_stage(name: str, shape: Shape, sequences: int, width: int, prompt: int, precision: Precision,
                   note: str, trained: dict | None = None, samples: int = 1) -> dict:
    """One sampling call on ``sequences`` sequences of up to ``width`` tokens (``prompt`` of them the prompt),
    ``samples`` of them continuing each prompt: the weights, the KV cache, one layer's working set during the prompts'
    forward pass, and the last position's float32 logits (x 3: scores, processed scores, probabilities); ``trained``:
    a trainer's float32 parameters held meanwhile. The cache and the prefill hold each prompt once
    (``thai_grpo.models.decoding``, ``sampling_kv_floats``); ``samples`` = 1 is also TRL's ``generate``, where every
    sequence holds its own prompt."""
    prompts = -(-sequences // samples)
    working = prompts * prompt * (3 * shape.intermediate_size + 2 * shape.q_dim + 2 * shape.kv_dim +
                                  2 * shape.hidden_size)
    kv = sampling_kv_floats(shape, prompts, samples, prompt, width - prompt)
    return stage(name, {"weights": base_parameters(shape) * precision.frozen_bytes, **(trained or {}),
                        "kv_cache": kv * precision.compute_bytes,
                        "prefill_layer": working * precision.compute_bytes,
                        "logits": 3 * sequences * shape.vocab_size * 4}, note)


def greedy_problems_per_call(shape: Shape, problems: int, samples: int, completion: int,
                             precision: Precision = FLOAT32_EVALUATION, prompt: int = PROMPT_TOKENS) -> int:
    """Problems per call of held-out sampling's greedy answers (one sequence each, its own prompt): the most whose
    call this plan fits in the memory of a sampling call of ``problems`` x ``samples`` (each prompt held once), and at
    least ``problems``. Shorter prompts than ``prompt`` only make the greedy call the smaller of the two."""
    def peak(prompts: int, each: int) -> int:
        return sampling_stage("", shape, prompts * each, prompt + completion, prompt, precision, "",
                              samples=each)["peak_bytes"]

    per_problem = peak(2, 1) - peak(1, 1)
    return max(problems, (peak(problems, samples) - peak(0, 1)) // per_problem)


def fits_card(plan: dict, card_gib: float) -> bool:
    """Whether a stage's peak is within a card of ``card_gib`` total GiB, less the CUDA context and allocator slack."""
    return plan["peak_bytes"] / GIB <= card_gib - RESERVE_GIB


def balanced_batch(problems: int, largest: int) -> int:
    """Problems per call when at most ``largest`` fit: as few calls as ``largest`` needs, their sizes evened out
    (256 problems with room for 130: two calls of 128, the same decode steps, less memory)."""
    calls = -(-problems // max(1, largest))
    return -(-problems // calls)


def sampling_batch_for_card(shape: Shape, num_samples: int, completion: int, problems: int, card_gib: float,
                            precision: Precision = FLOAT32_EVALUATION, prompt: int = PROMPT_TOKENS) -> int:
    """Problems per ``generate`` call (x ``num_samples`` sequences of up to ``prompt + completion`` tokens) for a card
    of ``card_gib`` GiB: the most whose sampling call fits it (each prompt held once), evened out over the calls
    ``problems`` need. Held-out sampling's greedy calls are sized to the same memory (``greedy_problems_per_call``)."""
    def fits(batch: int) -> bool:
        return fits_card(sampling_stage("", shape, batch * num_samples, prompt + completion, prompt, precision, "",
                                        samples=num_samples), card_gib)

    largest = next((batch for batch in range(max(1, problems), 0, -1) if fits(batch)), None)
    if largest is None:
        raise ValueError(f"one problem x {num_samples} samples of {prompt + completion} tokens does not fit a "
                         f"{card_gib:.1f} GiB card: lower num_samples or max_new_tokens, or set batch_size: 1")
    return balanced_batch(problems, largest)


def ppo_chunk_floats_for_card(shape: Shape, sft: Lora, value: Lora, settings: dict, completion: int, card_gib: float,
                              precision: Precision = T4, prompt: int = PROMPT_TOKENS) -> int:
    """``ppo.chunk_floats`` for a card of ``card_gib`` GiB: the largest power of two (2^24 to 2^40) whose PPO stages
    (rollouts, log-prob passes, a minibatch's forward-backward) fit it, then the smallest with the same chunks (a
    larger budget would split no pass less)."""
    def peaks(power: int) -> tuple:
        plans = ppo_stages("", shape, sft, value, {**settings, "chunk_floats": 2 ** power}, completion, 2 ** power,
                           precision, prompt)
        return tuple(plan["peak_bytes"] for plan in plans)

    budget = (card_gib - RESERVE_GIB) * GIB
    power = next((power for power in range(40, 23, -1) if max(peaks(power)) <= budget), None)
    if power is None:
        raise ValueError(f"PPO does not fit a {card_gib:.1f} GiB card even in chunks of 2^24 floats: lower "
                         "ppo.batch_size or the completion length")
    while power > 24 and peaks(power - 1) == peaks(power):
        power -= 1
    return 2 ** power


def memory_for_job(free_gib: float, total_gib: float, jobs_per_card: int) -> float:
    """What one job may size itself for on a card of ``total_gib``: what is free on it now, and no more than its share
    when ``jobs_per_card`` jobs share the card (jobs that start together each see the whole card free)."""
    return min(free_gib, total_gib / max(1, jobs_per_card))


def card_gib_of(device) -> float | None:
    """The memory (GiB) this job may size ``auto`` for on its CUDA GPU (``memory_for_job``: ``torch.cuda.mem_get_info``'s
    free and total memory, the card shared by ``devices.jobs_per_gpu()`` jobs), else None."""
    import torch

    from thai_grpo.jobs.devices import jobs_per_gpu

    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info(device)
    return memory_for_job(free / GIB, total / GIB, jobs_per_gpu())


def sizing_gib(device) -> float:
    """The card memory a job sizes ``auto`` for: what it may have of its GPU (``card_gib_of``), or a T4's on a CPU (the
    smallest card planned)."""
    return card_gib_of(device) or CARD_GIB


def shape_of(model_dir) -> Shape:
    """The ``Shape`` in a model folder's ``config.json``."""
    import json
    from pathlib import Path

    return Shape.from_config(json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8")))


def sampling_sizes(requested, model_dir, num_samples: int, completion: int, problems: int, device) -> dict:
    """What a sampling job runs with, as it records it beside its samples: ``batch_size`` (problems per generate
    call: ``requested``, or for ``auto`` ``sampling_batch_for_card`` on the job's card), the sequences per call and
    the card it was sized for."""
    card = card_gib_of(device)
    if requested == AUTO:
        batch = sampling_batch_for_card(shape_of(model_dir), num_samples, completion, problems, card or CARD_GIB)
    elif isinstance(requested, int) and requested >= 1:
        batch = requested
    else:
        raise ValueError(f"batch_size={requested!r}: use a positive integer or auto (sized to the GPU's memory)")
    return {"batch_size": batch, "requested": requested, "sequences_per_call": batch * num_samples,
            "problems": problems, "card_gib": None if card is None else round(card, 2),
            "sized_for": "this job's share of the GPU" if card else "a CPU (sized as a T4 when auto)"}


def ppo_stages(name: str, shape: Shape, sft: Lora, reward: Lora, settings: dict, completion: int,
               chunk_floats: int, precision: Precision = T4, prompt: int = PROMPT_TOKENS) -> list[dict]:
    """PPO (thai_grpo.methods.ppo): the bases of the policy and the value model, the reference and the reward model
    (frozen, at ``precision.frozen_bytes``), the trained LoRA and score head in float32, dropout off; its rollouts
    and its minibatch update, each split into chunks of rows (``rows_per_chunk``, as the code sizes them)."""
    batch, minibatches = int(settings.get("batch_size", 64)), int(settings.get("num_mini_batches", 1))
    chunk_floats = int(settings.get("chunk_floats", chunk_floats))
    width, compute = prompt + completion, precision.compute_bytes
    nodrop, value = dataclasses.replace(sft, lora_dropout=0.0), dataclasses.replace(reward, lora_dropout=0.0)
    frozen = 2 * base_parameters(shape) + base_parameters(shape, "score") + \
        (base_parameters(shape, "score") if settings.get("score") != "verifier" else 0)
    weights = frozen * precision.frozen_bytes
    states = {key: trained_bytes(shape, nodrop, precision)[key] + trained_bytes(shape, value, precision,
                                                                                  shape.hidden_size)[key]
              for key in trained_bytes(shape, nodrop, precision)}
    generate_rows = rows_per_chunk(generation_floats(shape, prompt, completion), batch, chunk_floats)
    pass_rows = rows_per_chunk(logprob_pass_floats(shape, width), batch, chunk_floats)
    size = batch // minibatches
    update_rows = rows_per_chunk(ppo_update_floats(shape, nodrop, value, width, completion), size, chunk_floats)
    rollout = {"weights": weights, **states,
               "kv_cache": sampling_kv_floats(shape, generate_rows, 1, prompt, completion) * compute,
               "logprob_pass": pass_rows * logits_bytes(shape, width, completion, compute)}
    update = {"weights": weights, **states,
              "activations": (activation_bytes(shape, nodrop, update_rows * width, compute) +
                              activation_bytes(shape, value, update_rows * width, compute)),
              "logits": update_rows * logits_bytes(shape, width, completion, compute)}
    return [stage(f"PPO ({name}): rollouts", rollout,
                  f"{batch} prompts, generated {generate_rows} at a time, log-prob passes of {pass_rows} rows; "
                  "the largest of generation and log-prob pass counted once each"),
            stage(f"PPO ({name}): update", update,
                  f"minibatches of {size} rows in {chunks(size, update_rows)} chunks of {update_rows} "
                  "(gradients accumulated), under autocast where the weights are 16-bit")]


