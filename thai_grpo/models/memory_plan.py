"""Peak memory of each stage of the real run, computed from the model's shape and the config's sizes.

Every stage holds, at its peak: the weights of the models it loads, the trainable LoRA parameters with their
gradients and AdamW's two moments, what autograd saves for the backward pass (activations), the full-vocabulary
logits of the largest chunk of rows a pass builds, and, while sampling, the KV cache. Each piece is a pure function
of a ``Shape`` (read from a ``config.json``) and the stage's sizes; ``stage_plans`` puts them together per stage of
the real config and gives the verdict against a card's memory.

Activations are counted from the tensors autograd saves in a Qwen3 decoder layer whose base weights are frozen and
LoRA adapters train (per token, per layer; ``saved_per_token_layer``): the two RMSNorm inputs and scales, q/k norm
inputs, what scaled-dot-product attention keeps (q, k, v, output, log-sum-exp), the MLP's gate, activation and up
outputs, plus each adapter's rank-r intermediate and the inputs an adapter needs that the frozen layer would not keep.
A frozen linear layer saves no input (its weight gets no gradient). ``tests/test_memory_plan.py`` checks this count
against autograd's own (``saved_tensors_hooks``) and the parameter counts against instantiated models;
``scripts/memory_plan.py --check`` compares whole predicted peaks with peaks measured on CPU stand-ins.

The same arithmetic sizes the chunks the code builds (``rows_per_chunk``): a pass over rows is split so that one
chunk's largest per-row tensors stay within ``CHUNK_FLOATS`` floats. The offline default's tiny model always fits in
one chunk, so chunking never changes its numbers.
"""

from __future__ import annotations

import dataclasses
import math

CHUNK_FLOATS = 2 ** 28  # floats of one chunk's largest per-row tensors (1 GiB in float32)
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
GIB = 2 ** 30
ADAMW_STATE_BYTES = 4 + 4 + 8  # a float32 LoRA parameter: its gradient, and AdamW's exp_avg and exp_avg_sq
ATTENTION_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")


@dataclasses.dataclass(frozen=True)
class Shape:
    """What memory depends on in a Qwen3 ``config.json``."""
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    tie_word_embeddings: bool = True

    @classmethod
    def from_config(cls, config) -> "Shape":
        """From a transformers config object or a ``config.json`` dict."""
        get = config.get if isinstance(config, dict) else lambda key, default=None: getattr(config, key, default)
        heads = get("num_attention_heads")
        return cls(vocab_size=get("vocab_size"), hidden_size=get("hidden_size"),
                   intermediate_size=get("intermediate_size"), num_layers=get("num_hidden_layers"), num_heads=heads,
                   num_kv_heads=get("num_key_value_heads"), head_dim=get("head_dim") or get("hidden_size") // heads,
                   tie_word_embeddings=bool(get("tie_word_embeddings", True)))

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def module_dims(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear layer of a decoder layer."""
        h, i = self.hidden_size, self.intermediate_size
        return {"q_proj": (h, self.q_dim), "k_proj": (h, self.kv_dim), "v_proj": (h, self.kv_dim),
                "o_proj": (self.q_dim, h), "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}


# Qwen/Qwen3-0.6B's public config.json: hidden 1024, intermediate 3072, 28 layers, 16 heads, 8 KV heads, head_dim
# 128, vocabulary 151,936, tied embeddings.
QWEN3_0_6B = Shape(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_layers=28, num_heads=16,
                   num_kv_heads=8, head_dim=128)


@dataclasses.dataclass(frozen=True)
class Lora:
    """A LoRA adapter's rank, target modules and dropout (``adapter_config.json``)."""
    r: int = 16
    target_modules: tuple[str, ...] = ATTENTION_TARGETS
    lora_dropout: float = 0.0

    @classmethod
    def from_config(cls, config: dict) -> "Lora":
        return cls(r=int(config["r"]), target_modules=tuple(sorted(config["target_modules"])),
                   lora_dropout=float(config.get("lora_dropout", 0.0)))


# ----------------------------------------------------------------------------------------- parameters
def layer_parameters(shape: Shape) -> int:
    """One decoder layer: the seven projections (no biases), q/k norms, two RMSNorms."""
    linear = sum(a * b for a, b in shape.module_dims().values())
    return linear + 2 * shape.head_dim + 2 * shape.hidden_size


def base_parameters(shape: Shape, head: str = "lm") -> int:
    """All parameters of the model: embedding, layers, final norm, and the head: ``lm`` (a second vocab x hidden
    matrix unless tied) or ``score`` (a sequence-classification head with one output)."""
    body = shape.vocab_size * shape.hidden_size + shape.num_layers * layer_parameters(shape) + shape.hidden_size
    if head == "score":
        return body + shape.hidden_size
    return body + (0 if shape.tie_word_embeddings else shape.vocab_size * shape.hidden_size)


def lora_parameters(shape: Shape, lora: Lora) -> int:
    """r x (in + out) per targeted module per layer."""
    dims = shape.module_dims()
    return shape.num_layers * sum(lora.r * sum(dims[name]) for name in lora.target_modules)


# ----------------------------------------------------------------------------------------- activations
def saved_per_token_layer(shape: Shape, lora: Lora | None, first_layer: bool = False) -> int:
    """Floats autograd saves per token in one decoder layer (frozen base, LoRA ``lora`` training; sdpa attention).

    Frozen layer: input RMSNorm (input + 1 scale), q and k norms (inputs + one scale per head), attention (q, k, v,
    output, one log-sum-exp per head), post-attention RMSNorm (input + 1), MLP (gate output, its SiLU, up output).
    Adapters: each keeps its rank-r intermediate; the attention input is kept once when q, k or v is targeted, the
    MLP input once when gate or up is, the down projection's input when down is; LoRA dropout > 0 adds
    ``dropout_floats``."""
    h, q, kv, i = shape.hidden_size, shape.q_dim, shape.kv_dim, shape.intermediate_size
    frozen = 2 * h + 2 + 3 * q + 3 * kv + 2 * shape.num_heads + shape.num_kv_heads + 3 * i
    if lora is None:
        return frozen
    targets = set(lora.target_modules)
    adapters = lora.r * len(targets) + h * bool(targets & {"q_proj", "k_proj", "v_proj"}) + \
        h * bool(targets & {"gate_proj", "up_proj"}) + i * ("down_proj" in targets)
    return frozen + adapters + (dropout_floats(shape, targets, first_layer) if lora.lora_dropout > 0 else 0)


def dropout_floats(shape: Shape, targets: set[str], first_layer: bool = False) -> int:
    """What LoRA dropout adds per token and layer, as autograd saves it (torch 2.13, counted with saved-tensor hooks):
    each adapter's dropped-out input and its float mask (in_features each; no mask where the input needs no gradient:
    q, k and v of the first layer, fed by the frozen embedding), less the attention input the adapters no longer
    keep themselves."""
    dims = shape.module_dims()
    masked = {name for name in targets if not (first_layer and name in ("q_proj", "k_proj", "v_proj"))}
    return sum(dims[name][0] for name in targets) + sum(dims[name][0] for name in masked) - \
        shape.hidden_size * bool(targets & {"q_proj", "k_proj", "v_proj"})


def activation_floats(shape: Shape, lora: Lora | None, tokens: int, checkpointing: bool = False) -> int:
    """Floats saved for the backward pass of ``tokens`` tokens through the whole model. With activation checkpointing
    only each layer's input is kept, plus one layer's saved tensors while it is recomputed."""
    per_layer = saved_per_token_layer(shape, lora)
    if checkpointing:
        return tokens * (shape.num_layers * shape.hidden_size + per_layer)
    return tokens * (saved_per_token_layer(shape, lora, first_layer=True) + (shape.num_layers - 1) * per_layer)


def kv_cache_floats(shape: Shape, sequences: int, length: int) -> int:
    """Keys and values of every layer for ``sequences`` sequences of ``length`` tokens."""
    return sequences * length * shape.num_layers * 2 * shape.kv_dim


# ----------------------------------------------------------------------------------------- chunking
def rows_per_chunk(floats_per_row: int, rows: int, budget: int = CHUNK_FLOATS) -> int:
    """How many of ``rows`` rows one chunk of a pass takes so that its per-row tensors (``floats_per_row`` each) stay
    within ``budget`` floats; at least one row, at most all of them (one chunk: the pass is not split)."""
    return max(1, min(rows, budget // max(1, floats_per_row)))


def logprob_pass_floats(shape: Shape, width: int) -> int:
    """Per row, a no-grad log-prob pass: the full-vocabulary logits of ``width`` positions."""
    return width * shape.vocab_size


def ppo_logit_floats(shape: Shape, width: int, completion: int) -> int:
    """Per row, the most full-vocabulary floats one PPO forward-backward holds at once: the logits of every position
    with two completion-sized tensors beside them (logits / T and its log-softmax; in the backward pass, the
    log-softmax's gradient and output, and the full-width gradient of the logits)."""
    return (width + 2 * completion) * shape.vocab_size


def ppo_update_floats(shape: Shape, lora: Lora, value_lora: Lora, width: int, completion: int) -> int:
    """Per row, one PPO forward-backward: the policy's and the value model's saved activations and the policy's
    full-vocabulary tensors (``ppo_logit_floats``)."""
    return ppo_logit_floats(shape, width, completion) + width * shape.num_layers * (
        saved_per_token_layer(shape, lora) + saved_per_token_layer(shape, value_lora))


def generation_floats(shape: Shape, length: int) -> int:
    """Per sampled sequence, its KV cache at full ``length`` (prompt + completion)."""
    return kv_cache_floats(shape, 1, length)


def chunks(rows: int, per_chunk: int) -> int:
    return math.ceil(rows / per_chunk)


# ----------------------------------------------------------------------------------------- stages
# What a 16 GB T4 leaves to tensors: 15.1 GiB visible to CUDA, ~0.5 GiB for the CUDA context and kernels, ~1 GiB of
# allocator slack (fragmentation): a stage "fits" when its predicted peak is within CARD_GIB - RESERVE_GIB.
CARD_GIB, RESERVE_GIB = 15.1, 1.5
PROMPT_TOKENS = 256  # the chapter's max_prompt_length: an upper bound for the system prompt, question and template


def norm_floats_per_token_layer(shape: Shape) -> int:
    """Of ``saved_per_token_layer``, what RMSNorm keeps in float32 even under 16-bit autocast (inputs, scales)."""
    return 2 * shape.hidden_size + 2 + shape.q_dim + shape.kv_dim + shape.num_heads + shape.num_kv_heads


def activation_bytes(shape: Shape, lora: Lora | None, tokens: int, compute_bytes: int,
                     checkpointing: bool = False) -> int:
    """Saved activations in bytes: RMSNorm's part in float32, the rest at ``compute_bytes`` (4, or 2 under
    float16/bfloat16 autocast)."""
    per_layer = saved_per_token_layer(shape, lora)
    norms = norm_floats_per_token_layer(shape)
    layer_bytes = norms * 4 + (per_layer - norms) * compute_bytes
    if checkpointing:
        return tokens * (shape.num_layers * shape.hidden_size * compute_bytes + layer_bytes)
    return tokens * shape.num_layers * layer_bytes


def autocast_weight_bytes(shape: Shape, head: str = "lm", checkpointing: bool = False) -> int:
    """Under 16-bit autocast every float32 weight a matmul uses is cast to a 16-bit copy, which autograd keeps for the
    backward pass: the decoder layers' projections (with activation checkpointing, one layer's at a time) and the
    (tied) output head."""
    dims = shape.module_dims()
    linear = (1 if checkpointing else shape.num_layers) * sum(a * b for a, b in dims.values())
    out = shape.vocab_size * shape.hidden_size if head == "lm" else shape.hidden_size
    return 2 * (linear + out)


def lora_state_bytes(shape: Shape, lora: Lora, head_params: int = 0) -> int:
    """Trainable float32 LoRA parameters (and a trained score head) with their gradients and AdamW states."""
    return (lora_parameters(shape, lora) + head_params) * (4 + ADAMW_STATE_BYTES)


def gib(value: float) -> float:
    return round(value / GIB, 2)


def stage(name: str, pieces: dict, note: str) -> dict:
    """A stage's pieces (bytes), their sum and the verdict for a 16 GB T4."""
    peak = sum(pieces.values())
    fits = peak / GIB <= CARD_GIB - RESERVE_GIB
    return {"stage": name, "pieces_gib": {key: gib(value) for key, value in pieces.items()}, "peak_gib": gib(peak),
            "verdict": "fits a 16 GB T4" if fits else f"needs more: {gib(peak) + RESERVE_GIB:.0f}+ GiB card",
            "fits_t4": fits, "note": note}


# TRL 1.16's GRPO, RLOO and DPO trainers never build a batch's full logits: their fused LM head
# (trl.kernels.chunked_logprob) projects at most 4,096 tokens x 32,768 vocabulary entries at a time.
TRL_TILE_TOKENS, TRL_TILE_VOCAB = 4096, 32768


def trl_training_stage(name: str, shape: Shape, lora: Lora, rows: int, width: int, logits_positions: int,
                       note: str, head: str = "lm", checkpointing: bool = False, compute_bytes: int = 2) -> dict:
    """A TRL trainer's forward-backward under 16-bit autocast (fp16 on a T4): float32 weights as the pipeline loads
    them, LoRA states, autocast's 16-bit weight copies, saved activations of ``rows`` x ``width`` tokens, and (``lm``
    head) one tile of TRL's fused log-prob head: a 16-bit projection tile and its float32 transform."""
    pieces = {"weights": base_parameters(shape, head) * 4,
              "lora_and_adamw": lora_state_bytes(shape, lora, shape.hidden_size if head == "score" else 0),
              "autocast_copies": autocast_weight_bytes(shape, head, checkpointing),
              "activations": activation_bytes(shape, lora, rows * width, compute_bytes, checkpointing)}
    if head == "lm":
        tile = min(rows * logits_positions, TRL_TILE_TOKENS) * min(shape.vocab_size, TRL_TILE_VOCAB)
        pieces["logits"] = tile * (compute_bytes + 4)
    return stage(name, pieces, note)


def sampling_stage(name: str, shape: Shape, sequences: int, width: int, weight_bytes: int, note: str,
                   extra_weights: int = 0) -> dict:
    """``generate`` on ``sequences`` sequences of up to ``width`` tokens: weights at ``weight_bytes``, the KV cache,
    one layer's working set during the prompt's forward pass, and the last position's float32 logits (x 3: scores,
    processed scores, probabilities)."""
    prompt = sequences * PROMPT_TOKENS
    working = prompt * (3 * shape.intermediate_size + 2 * shape.q_dim + 2 * shape.kv_dim + 2 * shape.hidden_size)
    return stage(name, {"weights": base_parameters(shape) * weight_bytes + extra_weights,
                        "kv_cache": kv_cache_floats(shape, sequences, width) * weight_bytes,
                        "prefill_layer": working * weight_bytes,
                        "logits": 3 * sequences * shape.vocab_size * 4}, note)


def merged_configs(paths) -> dict:
    """YAML config files merged in order, each key by key on top of the ones before, as Snakemake merges them."""
    from pathlib import Path

    import yaml

    def merge(base: dict, top: dict) -> dict:
        return {**base, **{key: merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict)
                           else value for key, value in top.items()}}

    config: dict = {}
    for path in paths:
        config = merge(config, yaml.safe_load(Path(path).read_text(encoding="utf-8")))
    return config


def stage_plans(config: dict, shape: Shape = QWEN3_0_6B, sft_lora: Lora | None = None,
                chunk_floats: int = CHUNK_FLOATS) -> list[dict]:
    """Every stage of a real-config run (its ``grpo``, ``eval``, ``reward_model`` and PPO/DPO variant sections), for
    ``shape`` on one 16 GB GPU that trains in float16 autocast (a T4). ``sft_lora``: the SFT adapter's shape (the
    hub adapter's is not in the config: by default the reward model's, r 16 on the attention projections, with
    dropout 0.05 as many hub adapters have it)."""
    grpo, ev, variants = config["grpo"], config["eval"], config.get("variants", {})
    reward_lora = config.get("reward_model", {}).get("lora") or {}
    reward = Lora(r=int(reward_lora.get("r", 16)), target_modules=tuple(sorted(reward_lora.get(
        "target_modules", ATTENTION_TARGETS))), lora_dropout=float(reward_lora.get("lora_dropout", 0.0)))
    sft = sft_lora or Lora(r=reward.r, target_modules=reward.target_modules, lora_dropout=0.05)
    completion = int(ev.get("max_new_tokens") or grpo.get("max_completion_length", 256))
    plans = []
    for variant, label in (("grpo", "GRPO full"), ("grpo_fast", "GRPO fast")):
        if variant not in variants:
            continue
        args = {**grpo, **variants[variant].get("grpo", {})}
        rows, length = int(args["per_device_train_batch_size"]), int(args["max_completion_length"])
        generation = rows * int(args.get("gradient_accumulation_steps", 1))
        checkpointing = bool(args.get("activation_checkpointing", False))
        train = trl_training_stage(
            f"{label}: train step", shape, sft, rows, PROMPT_TOKENS + length, length,
            f"{rows} completions of {length} tokens per forward-backward; activation checkpointing "
            f"{'on' if checkpointing else 'off'}; lora_dropout {sft.lora_dropout} (GRPOTrainer keeps dropout)",
            checkpointing=checkpointing)
        plans.append(train)
        plans.append(sampling_stage(
            f"{label}: rollouts", shape, generation, PROMPT_TOKENS + length, 2,
            f"{generation} completions per generation batch (TRL: batch x gradient_accumulation_steps), float32 "
            "weights sampled under fp16 autocast", extra_weights=base_parameters(shape) * 2))
    plans.append(sampling_stage(
        "held-out sampling", shape, int(ev["batch_size"]) * int(ev["num_samples"]), PROMPT_TOKENS + completion, 2,
        f"{ev['batch_size']} problems x {ev['num_samples']} samples per generate call, weights in float16 "
        "(base.dtype auto)"))
    width = PROMPT_TOKENS + completion
    rows = rows_per_chunk(logprob_pass_floats(shape, width), 32, chunk_floats)
    plans.append(stage("token log-probs (k1 vs k3)", {
        "weights": base_parameters(shape) * 4 + 2 * lora_parameters(shape, sft) * 4,
        "logits": 3 * rows * width * shape.vocab_size * 4,
        "exact_kl": 12 * completion * shape.vocab_size * 8}, f"{rows} rows per chunk of {width} tokens (two "
                                                                "log-softmax batches held), float64 exact KL of one "
                                                                "completion at a time"))
    if any(v.get("method") in ("ppo", "dpo") for v in variants.values()):
        rm = config.get("reward_model", {}).get("args", {})
        rm_rows = 2 * int(rm.get("per_device_train_batch_size", 8))
        checkpointing = bool(rm.get("activation_checkpointing", False))
        plans.append(trl_training_stage(
            "reward model: train step", shape, reward, rm_rows, PROMPT_TOKENS + completion + 1, 0,
            f"{rm_rows // 2} pairs (chosen and rejected) of up to {PROMPT_TOKENS + completion + 1} tokens, "
            f"sequence-classification head; activation checkpointing {'on' if checkpointing else 'off'}",
            head="score", checkpointing=checkpointing))
    for name, overrides in variants.items():
        if overrides.get("method") == "dpo" and name in ev.get("models", []):
            dpo = {**grpo, **overrides.get("grpo", {}), **overrides.get("dpo", {})}  # DPO inherits grpo's loop fields
            pairs = int(dpo.get("per_device_train_batch_size", 8))
            length = int(dpo.get("max_length", 1024))
            checkpointing = bool(dpo.get("activation_checkpointing", False))
            plans.append(trl_training_stage(
                f"DPO ({name}): train step", shape, dataclasses.replace(sft, lora_dropout=0.0), 2 * pairs, length,
                length, f"{pairs} pairs, chosen and rejected concatenated: {2 * pairs} rows of up to {length} tokens; "
                f"activation checkpointing {'on' if checkpointing else 'off'}; dropout off (DPOConfig's default)",
                checkpointing=checkpointing))
        if overrides.get("method") == "ppo" and name in ev.get("models", []):
            plans += ppo_stages(name, shape, sft, reward, {**overrides.get("ppo", {})}, completion, chunk_floats)
    return plans


def ppo_stages(name: str, shape: Shape, sft: Lora, reward: Lora, settings: dict, completion: int,
               chunk_floats: int) -> list[dict]:
    """PPO (thai_grpo.methods.ppo) on a GPU: the trained policy and value model in float32, the frozen reference and
    reward model in 16 bits, dropout off; its rollouts and its minibatch update, each split into chunks of rows."""
    batch, minibatches = int(settings.get("batch_size", 64)), int(settings.get("num_mini_batches", 1))
    chunk_floats = int(settings.get("chunk_floats", chunk_floats))
    width = PROMPT_TOKENS + completion
    nodrop = dataclasses.replace(sft, lora_dropout=0.0)
    value = dataclasses.replace(reward, lora_dropout=0.0)
    weights = (base_parameters(shape) + base_parameters(shape, "score")) * 4 + \
        (base_parameters(shape) + (base_parameters(shape, "score") if settings.get("score") != "verifier" else 0)) * 2
    states = lora_state_bytes(shape, nodrop) + lora_state_bytes(shape, value, shape.hidden_size)
    generate_rows = rows_per_chunk(generation_floats(shape, width), batch, chunk_floats)
    pass_rows = rows_per_chunk(logprob_pass_floats(shape, width), batch, chunk_floats)
    size = batch // minibatches
    update_rows = rows_per_chunk(ppo_update_floats(shape, nodrop, value, width, completion), size, chunk_floats)
    rollout = {"weights": weights, "lora_and_adamw": states,
               "kv_cache": kv_cache_floats(shape, generate_rows, width) * 4,
               "logprob_pass": 3 * pass_rows * width * shape.vocab_size * 4}
    update = {"weights": weights, "lora_and_adamw": states,
              "activations": (activation_bytes(shape, nodrop, update_rows * width, 4) +
                              activation_bytes(shape, value, update_rows * width, 4)),
              "logits": update_rows * ppo_logit_floats(shape, width, completion) * 4}
    return [stage(f"PPO ({name}): rollouts", rollout,
                  f"{batch} prompts, generated {generate_rows} at a time, log-prob passes of {pass_rows} rows; "
                  "the largest of generation and log-prob pass counted once each"),
            stage(f"PPO ({name}): update", update,
                  f"minibatches of {size} rows in {chunks(size, update_rows)} chunks of {update_rows} "
                  "(gradients accumulated), float32")]


def markdown_table(plans: list[dict]) -> str:
    """The plan as a markdown table: stage, its pieces in GiB, the peak and the verdict."""
    lines = ["| stage | pieces (GiB) | peak (GiB) | verdict |", "|---|---|---|---|"]
    for plan in plans:
        pieces = ", ".join(f"{key} {value}" for key, value in plan["pieces_gib"].items())
        lines.append(f"| {plan['stage']} | {pieces} | {plan['peak_gib']} | {plan['verdict']} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- measuring on a GPU
CUDA_PEAKS_ENV = "THAI_GRPO_CUDA_PEAKS"
# Which plan stages each job of the pipeline runs (the plan's prediction for a job is the largest of them).
JOB_STAGES = {"train-grpo": ("GRPO full",), "train-grpo_fast": ("GRPO fast",), "sample-": ("held-out sampling",),
              "sample_extra-": ("held-out sampling",), "token_logprobs": ("token log-probs",),
              "reward_model": ("reward model",), "train-dpo": ("DPO (dpo)",), "train-ppo": ("PPO (ppo)",),
              "train-ppo_verifier": ("PPO (ppo_verifier)",)}


def record_cuda_peak(log_path: str) -> None:
    """Where ``THAI_GRPO_CUDA_PEAKS`` names a folder (``scripts/gpu_check.sh`` sets it), write this job's peak CUDA
    memory there when its process ends (``<log name>.json``); otherwise do nothing."""
    import os

    folder = os.environ.get(CUDA_PEAKS_ENV)
    if not folder:
        return
    import atexit
    import json
    from pathlib import Path

    def write() -> None:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            Path(folder).mkdir(parents=True, exist_ok=True)
            record = {"job": Path(log_path).stem, "max_allocated_gib": torch.cuda.max_memory_allocated() / GIB,
                      "max_reserved_gib": torch.cuda.max_memory_reserved() / GIB}
            (Path(folder) / f"{record['job']}.json").write_text(json.dumps(record))

    atexit.register(write)


def predicted_for_job(job: str, plans: list[dict]) -> float | None:
    """The plan's peak (GiB) for a pipeline job (its log name), the largest of the stages it runs; None if unplanned."""
    stages = JOB_STAGES.get(job) or next((names for prefix, names in JOB_STAGES.items()
                                          if prefix.endswith("-") and job.startswith(prefix)), None)
    peaks = [plan["peak_gib"] for plan in plans if stages and plan["stage"].startswith(stages)]
    return max(peaks) if peaks else None
