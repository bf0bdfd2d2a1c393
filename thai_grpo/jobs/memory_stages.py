"""The memory plan's stages in a device's bytes and the ``auto`` sizes for a job's GPU (never changing a sample)."""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
from pathlib import Path

from thai_grpo.jobs.devices import JOBS_PER_GPU_ENV
from thai_grpo.jobs.memory_plan import (
    ADAMW_STATE_BYTES, CHUNK_FLOATS, COMPACT_WHEN_DONE, GIB, Lora, Shape, base_parameters, generation_floats,
    logprob_pass_floats, lora_parameters, ppo_update_floats, rows_per_chunk, sampling_kv_floats, saved_per_token_layer,
)

# A T4's 14.75 GiB as torch reports it, less ~0.5 GiB of CUDA context and ~1 GiB of allocator slack.
CARD_GIB, RESERVE_GIB = 14.75, 1.5
AUTO = "auto"
PROMPT_TOKENS = 256  # the chapter's max_prompt_length: an upper bound for the system prompt, question and template
SAMPLER_WORDS = 3  # the sampler's float32 probabilities and their float64 cumulative sums: three float32 logits' bytes
PPO_PASSES = {"generate": "generation: ", "logprobs": "log-prob pass", "value": "value pass", "update": "update"}
# (free, total) bytes of each CUDA device as its job found it at the start, before it loaded any weights
_FREE_AT_JOB_START: dict = {}


@dataclasses.dataclass(frozen=True)
class Precision:
    """Bytes per frozen weight, activation and fused head-tile entry; whether trained weights get 16-bit copies."""
    device: str
    frozen_bytes: int
    compute_bytes: int
    autocast: bool
    head_tile_bytes: float


# TRL's fused head tile: on a GPU at the compute dtype plus a float32 view (Triton folds it in place); on a CPU its
# torch fallback holds ~8.25 float32 tensors of its size at once (measured by make rehearse-full).
T4 = Precision("a 16 GB T4 (float16 weights and autocast)", 2, 2, True, 2 + 4)
CPU = Precision("a CPU (float32, no autocast)", 4, 4, False, 4 + 8.25 * 4)
# Every evaluation stage on any device: eval.dtype (float32 by default: 16 bits would round away the chapter's update).
FLOAT32_EVALUATION = Precision("float32 evaluation (eval.dtype)", 4, 4, False, 4 + 4)


def activation_bytes(shape: Shape, lora: Lora | None, tokens: int, compute_bytes: int,
                     checkpointing: bool = False) -> int:
    """Saved activations in bytes of a padded batch (sdpa given its mask), RMSNorm's in float32; checkpointed: each
    layer's input plus one layer's."""
    norms = 2 * shape.hidden_size + 2 + shape.q_dim + shape.kv_dim + shape.num_heads + shape.num_kv_heads
    layer_bytes = norms * 4 + (saved_per_token_layer(shape, lora, masked=True) - norms) * compute_bytes
    if checkpointing:
        return tokens * (shape.num_layers * shape.hidden_size * compute_bytes + layer_bytes)
    return tokens * shape.num_layers * layer_bytes


def attention_bias_bytes(shape: Shape, rows: int, width: int, compute_bytes: int, checkpointing: bool = False) -> int:
    """sdpa's additive mask, ``rows`` x ``width`` x ``width`` a layer (one if checkpointed), kept for the backward."""
    return (1 if checkpointing else shape.num_layers) * rows * width * width * compute_bytes


def backward_working_bytes(shape: Shape, tokens: int, compute_bytes: int) -> int:
    """The backward's working set beside saved activations: an MLP's gate, up and SiLU gradients (measured)."""
    return tokens * 3 * shape.intermediate_size * compute_bytes


def completion_logprob_bytes(shape: Shape, completion: int, compute_bytes: int, backward: bool = False) -> int:
    """Per row, the peak of ``ppo.sequence_logprobs`` over ``completion`` tokens: logits (and their float32 copy)
    beside logits / T, or with ``backward`` four float32 completion-size tensors (tests/test_memory_measured.py)."""
    head = (completion + 1) * compute_bytes + (completion * 4 if compute_bytes < 4 else 0) + completion * 4
    held = max(head, 2 * completion * 4, (4 * completion * 4) if backward else 0)
    return shape.vocab_size * held


def gib(value: float) -> float:
    return round(value / GIB, 2)


def stage(name: str, pieces: dict, note: str) -> dict:
    """A stage's pieces (bytes), their sum and the verdict for a 16 GB T4."""
    peak = sum(pieces.values())
    fits = fits_card({"peak_bytes": peak}, CARD_GIB)
    return {"stage": name, "pieces_gib": {key: gib(value) for key, value in pieces.items()}, "peak_gib": gib(peak),
            "peak_bytes": peak, "verdict": "fits a 16 GB T4" if fits else f"needs more: {gib(peak) + RESERVE_GIB:.0f}+ "
            "GiB card", "fits_t4": fits, "note": note}


def trained_bytes(shape: Shape, lora: Lora, precision: Precision, head_params: int = 0) -> dict:
    """The trained float32 parameters with gradients and AdamW states, and under autocast their 16-bit copies."""
    trained = lora_parameters(shape, lora) + head_params
    copies = {"autocast_copies": 2 * trained} if precision.autocast else {}
    return {"lora_and_adamw": trained * (4 + ADAMW_STATE_BYTES), **copies}


def phased_stage(name: str, phases: dict[str, dict], note: str) -> dict:
    """``stage`` of the largest phase, with each phase's total: summing phases would count memory freed in between."""
    largest = max(phases, key=lambda phase: sum(phases[phase].values()))
    return {**stage(name, phases[largest], note), "phase": largest,
            "phases_gib": {phase: gib(sum(pieces.values())) for phase, pieces in phases.items()}}


def prefill_layer_floats(shape: Shape, prompts: int, prompt: int) -> int:
    """One decoder layer's working set while prefilling ``prompts`` prompts of ``prompt`` tokens."""
    return prompts * prompt * (3 * shape.intermediate_size + 2 * shape.q_dim + 2 * shape.kv_dim + 2 * shape.hidden_size)


def decode_phases(shape: Shape, sequences: int, width: int, prompt: int, compute_bytes: int, samples: int = 1) -> dict:
    """What one ``decoding.decode`` call holds beside the weights in its prefill, decode and compaction phases."""
    prompts = -(-sequences // samples)
    kv = sampling_kv_floats(shape, prompts, samples, prompt, width - prompt)
    row_logits = shape.vocab_size * 4  # float32 logits of one position
    step_logits = sequences * (row_logits + (shape.vocab_size * compute_bytes if compute_bytes < 4 else 0))
    return {"prefill": {"prompt_kv": sampling_kv_floats(shape, prompts, 0, prompt, 0) * compute_bytes,
                        "prefill_layer": prefill_layer_floats(shape, prompts, prompt) * compute_bytes,
                        "logits": prompts * row_logits},
            "decode": {"kv_cache": kv * compute_bytes,
                       "logits": step_logits + (SAMPLER_WORDS * sequences + prompts) * row_logits,
                       # one layer's float32 scores: the prompt's, the row's own, both joined, and the weights
                       "attention": 4 * sequences * shape.num_heads * width * 4},
            "compaction": {"kv_cache": kv * compute_bytes,
                           "compaction": int(kv // (2 * shape.num_layers) * (1 - COMPACT_WHEN_DONE)) * compute_bytes,
                           "logits": max(sequences, prompts) * row_logits}}


def sampling_stage(name: str, shape: Shape, sequences: int, width: int, prompt: int, precision: Precision,
                   note: str, samples: int = 1) -> dict:
    """One decode-loop call: its largest phase (``decode_phases``) beside the weights."""
    weights = base_parameters(shape) * precision.frozen_bytes
    phases = decode_phases(shape, sequences, width, prompt, precision.compute_bytes, samples)
    return phased_stage(name, {phase: {"weights": weights, **pieces} for phase, pieces in phases.items()}, note)


def fits_card(plan: dict, card_gib: float) -> bool:
    """Whether a stage's peak is within a card of ``card_gib`` total GiB, less the CUDA context and allocator slack."""
    return plan["peak_bytes"] / GIB <= card_gib - RESERVE_GIB


def balanced_batch(problems: int, largest: int) -> int:
    """Problems per call when at most ``largest`` fit: as few calls as needed, evened out (256, room for 130: 128)."""
    calls = -(-problems // largest)
    return -(-problems // calls)


def sampling_batch_for_card(shape: Shape, num_samples: int, completion: int, problems: int, card_gib: float,
                            precision: Precision = FLOAT32_EVALUATION, prompt: int = PROMPT_TOKENS) -> int:
    """Problems per sampling call for a card of ``card_gib`` GiB: the most that fit, evened out over the calls."""
    def fits(batch: int) -> bool:
        return fits_card(sampling_stage("", shape, batch * num_samples, prompt + completion, prompt, precision, "",
                                        samples=num_samples), card_gib)

    largest = next((batch for batch in range(max(1, problems), 0, -1) if fits(batch)), None)
    if largest is None:
        raise ValueError(f"one problem x {num_samples} samples of {prompt + completion} tokens does not fit a "
                         f"{card_gib:.1f} GiB card: lower num_samples or max_new_tokens, or set batch_size: 1")
    return balanced_batch(problems, largest)


def memory_for_job(free_gib: float, total_gib: float, jobs_per_card: int) -> float:
    """What a job may size for: what is free, at most its share (jobs starting together each see it all free)."""
    return min(free_gib, total_gib / jobs_per_card)


def jobs_per_gpu(environ=os.environ) -> int:
    """``jobs_per_card`` as the workflow recorded it (``THAI_GRPO_JOBS_PER_GPU``), 1 when unset."""
    value = environ.get(JOBS_PER_GPU_ENV, "1")
    return max(1, int(value)) if value.isdigit() else 1


def note_free_memory(device) -> None:
    """Record ``device``'s free memory before the job loads anything: the plan counts the job's weights itself."""
    import torch

    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        _FREE_AT_JOB_START[str(device)] = torch.cuda.mem_get_info(device)


def card_gib_of(device) -> float | None:
    """GiB this job may size ``auto`` for on its CUDA GPU (free at job start, within the process's share), else None."""
    import torch

    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    free, total = _FREE_AT_JOB_START.get(str(device)) or torch.cuda.mem_get_info(device)
    try:  # a cap on this process's share of the card (make gpu-check's T4 pass)
        allowed = total * float(torch.cuda.get_per_process_memory_fraction(device))
    except (AssertionError, RuntimeError):  # a CPU build of torch, or no CUDA here
        allowed = total
    return memory_for_job(min(free, allowed) / GIB, allowed / GIB, jobs_per_gpu())


def sizing_gib(device) -> float:
    """The card memory a job sizes ``auto`` for: ``card_gib_of``, or a T4's on a CPU."""
    return card_gib_of(device) or CARD_GIB


def sampling_sizes(requested, model_dir, num_samples: int, completion: int, problems: int, device) -> dict:
    """A sampling job's ``batch_size`` (``requested``, or sized to the card for ``auto``), kept with its samples."""
    card = card_gib_of(device)
    batch = requested  # auto or a positive integer: the config schema refuses anything else
    if requested == AUTO:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
        batch = sampling_batch_for_card(Shape.from_config(config), num_samples, completion, problems, card or CARD_GIB)
    return {"batch_size": batch, "requested": requested, "sequences_per_call": batch * num_samples,
            "problems": problems, "card_gib": None if card is None else round(card, 2),
            "sized_for": "this job's share of the GPU" if card else "a CPU (sized as a T4 when auto)"}


def ppo_held_bytes(shape: Shape, sft: Lora, value: Lora, score: str | None, precision: Precision) -> dict:
    """What PPO holds through every pass: the frozen bases, and the trained LoRAs and value head with AdamW states."""
    # the policy and its reference, the value model, and the reward model unless the verifier scores
    frozen = 2 * base_parameters(shape) + (1 + (score != "verifier")) * base_parameters(shape, "score")
    policy, value = trained_bytes(shape, sft, precision), trained_bytes(shape, value, precision, shape.hidden_size)
    return {"weights": frozen * precision.frozen_bytes, **{key: policy[key] + value[key] for key in policy}}


def ppo_pass_bytes(shape: Shape, sft: Lora, value: Lora, rows: int, prompt: int, completion: int,
                   compute_bytes: int, checkpointing: bool = False) -> dict[str, dict]:
    """Each PPO pass's own working set on ``rows`` rows: decode phases, log-prob pass, value pass and update."""
    width = prompt + completion
    update = (sum(activation_bytes(shape, lora, rows * width, compute_bytes, checkpointing) for lora in (sft, value)) +
              2 * attention_bias_bytes(shape, rows, width, compute_bytes, checkpointing) +
              backward_working_bytes(shape, rows * width, compute_bytes))
    return {**{f"generation: {phase}": pieces
               for phase, pieces in decode_phases(shape, rows, width, prompt, compute_bytes).items()},
            "log-prob pass": {"logprob_pass": rows * completion_logprob_bytes(shape, completion, compute_bytes)},
            "value pass": {"value_pass": prefill_layer_floats(shape, rows, width) * compute_bytes},
            "update": {"activations": update,
                       "logits": rows * completion_logprob_bytes(shape, completion, compute_bytes, backward=True)}}


def ppo_pass_rows(shape: Shape, sft: Lora, value: Lora, settings: dict, completion: int, card_gib: float | None = None,
                  precision: Precision = T4, prompt: int = PROMPT_TOKENS, may_checkpoint: bool = False) -> dict:
    """Rows per chunk of each PPO pass within ``chunk_floats`` per row, or for ``auto`` the most that fit ``card_gib``
    (checkpointing the update where ``may_checkpoint`` and that fits more rows)."""
    batch = int(settings.get("batch_size", 64))
    size = batch // int(settings.get("num_mini_batches", 1))
    nodrop, value = dataclasses.replace(sft, lora_dropout=0.0), dataclasses.replace(value, lora_dropout=0.0)
    chunk_floats = settings.get("chunk_floats", CHUNK_FLOATS)
    if chunk_floats != AUTO:
        width = prompt + completion
        per_row = {"generate": generation_floats(shape, prompt, completion),
                   "logprobs": logprob_pass_floats(shape, width), "value": prefill_layer_floats(shape, 1, width),
                   "update": ppo_update_floats(shape, nodrop, value, width, completion)}
        return {**{name: rows_per_chunk(floats, size if name == "update" else batch, int(chunk_floats))
                   for name, floats in per_row.items()}, "checkpointing": False}
    budget = (card_gib - RESERVE_GIB) * GIB - sum(ppo_held_bytes(shape, nodrop, value, settings.get("score"),
                                                                  precision).values())

    def most_rows(name: str, limit: int, checkpointing: bool = False) -> int:
        def fits(rows: int) -> bool:
            phases = ppo_pass_bytes(shape, nodrop, value, rows, prompt, completion, precision.compute_bytes,
                                    checkpointing)
            return all(sum(pieces.values()) <= budget for phase, pieces in phases.items()
                       if phase.startswith(PPO_PASSES[name]))

        if not fits(1):
            raise ValueError(f"PPO's {name} pass does not fit a {card_gib:.1f} GiB card even one row at a time: lower "
                             "the completion length or use a larger card")
        # the working set grows with the rows: the most that fit are those before the first that does not
        return bisect.bisect_left(range(1, limit + 1), True, key=lambda rows: not fits(rows))

    rows = {name: most_rows(name, batch) for name in ("generate", "logprobs", "value")}
    plain = most_rows("update", size)
    checkpointed = most_rows("update", size, checkpointing=True) if may_checkpoint and plain < size else plain
    return {**rows, "update": max(plain, checkpointed), "checkpointing": checkpointed > plain}


def ppo_stages(name: str, shape: Shape, sft: Lora, reward: Lora, settings: dict, completion: int, chunk_floats: int,
               precision: Precision = T4, prompt: int = PROMPT_TOKENS, card_gib: float | None = None) -> list[dict]:
    """PPO's rollouts and minibatch update at the rows ``ppo_pass_rows`` gives each pass."""
    settings = {**settings, "chunk_floats": settings.get("chunk_floats", chunk_floats)}
    sft, reward = dataclasses.replace(sft, lora_dropout=0.0), dataclasses.replace(reward, lora_dropout=0.0)
    rows = ppo_pass_rows(shape, sft, reward, settings, completion, card_gib, precision, prompt)
    held = ppo_held_bytes(shape, sft, reward, settings.get("score"), precision)
    size = int(settings.get("batch_size", 64)) // int(settings.get("num_mini_batches", 1))

    def pieces(pass_name: str) -> dict:
        return {phase: {**held, **working} for phase, working in ppo_pass_bytes(
            shape, sft, reward, rows[pass_name], prompt, completion, precision.compute_bytes,
            rows["checkpointing"]).items() if phase.startswith(PPO_PASSES[pass_name])}

    return [phased_stage(f"PPO ({name}): rollouts", {**pieces("generate"), **pieces("logprobs")},
                         f"{settings.get('batch_size', 64)} prompts, generated {rows['generate']} at a time, "
                         f"log-prob passes of {rows['logprobs']} rows; the largest of the decode loop's phases and a "
                         "log-prob pass"),
            stage(f"PPO ({name}): update", pieces("update")["update"],
                  f"minibatches of {size} rows in {-(-size // rows['update'])} chunks of {rows['update']} "
                  "(gradients accumulated), under autocast where the weights are 16-bit"
                  + (", activations checkpointed" if rows["checkpointing"] else ""))]
