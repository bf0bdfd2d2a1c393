"""What `make gpu-check` prints of the pipeline's choices per GPU: the model dtype, TRL's mixed-precision flags and the
attention kernel per compute capability (None: a CPU)."""

from __future__ import annotations

from thai_grpo.jobs.devices import choose_dtype


def precision_summary(capability: tuple[int, int] | None) -> dict:
    """The dtype, fp16/bf16/use_cpu flags and attention kernel for one device: ``sdpa`` everywhere, since
    FlashAttention-2 needs sm 8.0, from which SDPA already runs a flash kernel (the flash-attn wheel apart)."""
    dtype = choose_dtype(capability)
    return {"device": "cpu" if capability is None else f"cuda sm_{capability[0]}{capability[1]}", "dtype": dtype,
            "fp16": dtype == "float16", "bf16": dtype == "bfloat16", "use_cpu": capability is None,
            "attn_implementation": "sdpa",
            "flash_attention_2_possible": capability is not None and tuple(capability) >= (8, 0)}
