"""What the pipeline picks on each GPU, in one dictionary for ``make gpu-check`` to print: the model dtype, TRL's
mixed-precision flags and the attention kernel per compute capability (None: a CPU)."""

from __future__ import annotations

from thai_grpo.jobs.devices import choose_dtype


def attention_implementation(capability: tuple[int, int] | None) -> str:
    """``"sdpa"`` everywhere: FlashAttention-2 needs sm 8.0, from which SDPA already runs a flash kernel."""
    return "sdpa"


def flash_attention_2_possible(capability: tuple[int, int] | None) -> bool:
    """Whether the GPU could run FlashAttention-2 at all (sm >= 8.0; the flash-attn wheel apart)."""
    return capability is not None and tuple(capability) >= (8, 0)


def precision_summary(capability: tuple[int, int] | None) -> dict:
    """The model dtype, TRL's mixed-precision flags and the attention kernel for one device (None: a CPU)."""
    dtype = choose_dtype(capability)
    return {"device": "cpu" if capability is None else f"cuda sm_{capability[0]}{capability[1]}", "dtype": dtype,
            "fp16": dtype == "float16", "bf16": dtype == "bfloat16", "use_cpu": capability is None,
            "attn_implementation": attention_implementation(capability),
            "flash_attention_2_possible": flash_attention_2_possible(capability)}
