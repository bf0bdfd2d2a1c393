"""Per-GPU settings as pure functions of the compute capability: dtype, TRL precision flags, attention kernel.

``capability`` is ``torch.cuda.get_device_capability()`` - e.g. (7, 5) T4, (8, 0) A100, (8, 6) A10/RTX 30xx,
(8, 9) L4/RTX 40xx, (9, 0) H100/H200 - or None for CPU. The dtype rule is ``choose_dtype``; the rest follows
from it, so that tests can cover every GPU without one.
"""

from __future__ import annotations

# FlashAttention-2 needs sm >= 8.0 and the separate flash-attn wheel; SDPA (PyTorch's fused attention) runs
# everywhere, picks its own flash/memory-efficient kernel where the GPU has one, and is what the chapter uses.
FLASH_ATTENTION_MIN_CAPABILITY = (8, 0)


def choose_dtype(compute_capability: tuple[int, int] | None) -> str:
    """float32 on CPU; float16 before Ampere (sm < 8.0, e.g. a T4: no native bf16, although
    ``torch.cuda.is_bf16_supported()`` says True through emulation); bfloat16 from Ampere on."""
    if compute_capability is None:
        return "float32"
    return "bfloat16" if tuple(compute_capability) >= (8, 0) else "float16"


def device_dtype() -> str:
    """The dtype for this machine's first accelerator, per ``choose_dtype``."""
    return choose_dtype(current_capability())


def attention_implementation(capability: tuple[int, int] | None) -> str:
    """``"sdpa"`` on every device. Not ``flash_attention_2``: it does not exist below sm 8.0 (a T4), and from
    8.0 on SDPA already dispatches to a flash kernel without the extra dependency."""
    return "sdpa"


def flash_attention_2_possible(capability: tuple[int, int] | None) -> bool:
    """Whether the GPU could run FlashAttention-2 at all (sm >= 8.0); whether flash-attn is installed is separate."""
    return capability is not None and tuple(capability) >= FLASH_ATTENTION_MIN_CAPABILITY


def precision_summary(capability: tuple[int, int] | None) -> dict:
    """The model dtype, TRL's mixed-precision flags and the attention kernel for one device.

    CPU: float32, no fp16/bf16, ``use_cpu``. Before Ampere (T4, V100): float16 and ``fp16=True`` -
    ``torch.cuda.is_bf16_supported()`` answers True on a T4 through emulation, which is slow, so it is not
    asked. From Ampere on (A100, L4, H100): bfloat16 and ``bf16=True`` (no loss scaling needed).
    """
    dtype = choose_dtype(capability)
    return {
        "device": "cpu" if capability is None else f"cuda sm_{capability[0]}{capability[1]}",
        "dtype": dtype,
        "fp16": dtype == "float16",
        "bf16": dtype == "bfloat16",
        "use_cpu": capability is None,
        "attn_implementation": attention_implementation(capability),
        "flash_attention_2_possible": flash_attention_2_possible(capability),
    }


def current_capability() -> tuple[int, int] | None:
    """This machine's first GPU's compute capability, or None without CUDA (initialises CUDA when present)."""
    import torch

    return tuple(torch.cuda.get_device_capability(0)) if torch.cuda.is_available() else None
