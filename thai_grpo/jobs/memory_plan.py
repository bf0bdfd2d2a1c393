"""Memory formulas of a model's ``Shape`` that ``memory_stages`` sums per stage, and the rows per chunk of a pass."""

from __future__ import annotations

import dataclasses

CHUNK_FLOATS = 2 ** 28  # floats of one chunk's largest per-row tensors (1 GiB in float32)
GIB = 2 ** 30
ADAMW_STATE_BYTES = 4 + 4 + 8  # a float32 LoRA parameter: its gradient, and AdamW's exp_avg and exp_avg_sq
ATTENTION_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")
COMPACT_WHEN_DONE = 0.25  # the decode loop compacts its buffers once this share of their prompts has no sample going


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


def base_parameters(shape: Shape, head: str = "lm") -> int:
    """All parameters: embedding, layers, final norm and the head, ``lm`` (vocab x hidden unless tied) or ``score``."""
    # a decoder layer: the seven projections (no biases), q/k norms and two RMSNorms
    layer = sum(a * b for a, b in shape.module_dims().values()) + 2 * shape.head_dim + 2 * shape.hidden_size
    body = shape.vocab_size * shape.hidden_size + shape.num_layers * layer + shape.hidden_size
    if head == "score":
        return body + shape.hidden_size
    return body + (0 if shape.tie_word_embeddings else shape.vocab_size * shape.hidden_size)


def lora_parameters(shape: Shape, lora: Lora) -> int:
    """r x (in + out) per targeted module per layer."""
    dims = shape.module_dims()
    return shape.num_layers * sum(lora.r * sum(dims[name]) for name in lora.target_modules)


def saved_per_token_layer(shape: Shape, lora: Lora | None, first_layer: bool = False, masked: bool = False) -> int:
    """Floats autograd saves per token in one decoder layer under LoRA training (sdpa attention): norms, q/k/v,
    attention output and log-sum-exp, the MLP's gate, SiLU and up outputs, and each adapter's intermediates;
    ``masked`` (sdpa given a padding mask): the keys and values it gets repeated to every query head (``repeat_kv``)."""
    h, q, kv, i = shape.hidden_size, shape.q_dim, shape.kv_dim, shape.intermediate_size
    frozen = 2 * h + 2 + 3 * q + 3 * kv + 2 * shape.num_heads + shape.num_kv_heads + 3 * i + masked * 2 * (q - kv)
    if lora is None:
        return frozen
    targets = set(lora.target_modules)
    attention = bool(targets & {"q_proj", "k_proj", "v_proj"})
    adapters = lora.r * len(targets) + h * attention + h * bool(targets & {"gate_proj", "up_proj"}) + \
        i * ("down_proj" in targets)
    if lora.lora_dropout > 0:
        # each adapter's dropped-out input and mask (none for the first layer's q, k, v, whose input needs no
        # gradient), less the attention input the adapters no longer keep
        dims = shape.module_dims()
        masked = {name for name in targets if not (first_layer and name in ("q_proj", "k_proj", "v_proj"))}
        adapters += sum(dims[name][0] for name in targets) + sum(dims[name][0] for name in masked) - h * attention
    return frozen + adapters


def sampling_kv_floats(shape: Shape, prompts: int, samples: int, prompt: int, completion: int) -> int:
    """The decode loop's cache: each of ``prompts`` prompts once, ``samples`` completions each pre-allocated."""
    return (prompts * prompt + prompts * samples * completion) * shape.num_layers * 2 * shape.kv_dim


def rows_per_chunk(floats_per_row: int, rows: int, budget: int = CHUNK_FLOATS) -> int:
    """Rows per chunk of a pass so that its per-row tensors stay within ``budget`` floats: between 1 and ``rows``."""
    return max(1, min(rows, budget // max(1, floats_per_row)))


def logprob_pass_floats(shape: Shape, width: int) -> int:
    """Per row, a no-grad log-prob pass: the full-vocabulary logits of ``width`` positions."""
    return width * shape.vocab_size


def ppo_update_floats(shape: Shape, lora: Lora, value_lora: Lora, width: int, completion: int) -> int:
    """Per row, one PPO forward-backward: both models' activations, all logits, and logits / T and its log-softmax."""
    return (width + 2 * completion) * shape.vocab_size + width * shape.num_layers * (
        saved_per_token_layer(shape, lora) + saved_per_token_layer(shape, value_lora))


def generation_floats(shape: Shape, prompt: int, completion: int) -> int:
    """Per PPO rollout (one completion per prompt), its cache in the decode loop."""
    return sampling_kv_floats(shape, 1, 1, prompt, completion)
