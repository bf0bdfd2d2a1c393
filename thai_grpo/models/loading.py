"""Safe loading of base models and LoRA adapters (the hub's and the offline ``tiny_base`` leave the same folders)."""

from __future__ import annotations

from pathlib import Path

from thai_grpo.core.io import require_model_dir
from thai_grpo.jobs.devices import choose_dtype, current_capability


def count_parameters(model) -> dict:
    """Total and trainable parameter counts (LoRA: only the adapter is trainable)."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"total": total, "trainable": trainable}


def resolve_dtype(name: str):
    """A torch dtype by name; ``auto`` is this machine's (``resolved_dtype_name``)."""
    import torch

    return getattr(torch, resolved_dtype_name(name))


# Dtypes in which folding an adapter into its base (W + BA) keeps a small GRPO update (16 bits round it away).
MERGE_KEEPS_UPDATE = ("float32", "float64")


def resolved_dtype_name(name: str) -> str:
    """``auto`` as this machine's dtype (``devices.choose_dtype``), any other name as it is."""
    return choose_dtype(current_capability()) if name == "auto" else name


def weights_dtype(model) -> str:
    """The dtype the model's base weights were loaded in (its input embedding's), e.g. ``"bfloat16"``."""
    return str(model.get_input_embeddings().weight.dtype).removeprefix("torch.")


def load_tokenizer(path: str | Path):
    """The tokenizer of a local folder; it must have a chat template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    if tokenizer.chat_template is None:
        raise ValueError(f"tokenizer in {path} has no chat template: GRPO needs one to format prompts")
    return tokenizer


def load_base_model(path: str | Path, dtype: str = "float32", attn_implementation: str = "sdpa"):
    """A causal LM from a local folder: safetensors only, no remote code."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    require_model_dir(path, "base model")
    try:
        return AutoModelForCausalLM.from_pretrained(str(path), dtype=resolve_dtype(dtype), trust_remote_code=False,
                                                    use_safetensors=True, attn_implementation=attn_implementation)
    except (OSError, ValueError, SafetensorError) as error:
        raise RuntimeError(f"base model folder {path} could not be loaded ({error.__class__.__name__}: "
                           f"{str(error).splitlines()[0]}): delete it and rerun its stage") from error


def load_policy(base_path: str | Path, adapter_path: str | Path | None, trainable: bool = False,
                dtype: str = "auto", merged: bool = False):
    """The base with a LoRA adapter (``PeftModel``), or the bare base without one. ``dtype``: the frozen base's; a
    trainable adapter stays float32 (``models.upcast``: fp16's scaler unscales its gradients). ``merged``: a frozen
    adapter folded into the base weights (W + BA), a plain model."""
    from peft import PeftModel

    base = load_base_model(base_path, dtype)
    if adapter_path is None:
        return base
    require_model_dir(adapter_path, "adapter")
    policy = PeftModel.from_pretrained(base, str(adapter_path), is_trainable=trainable and not merged)
    if merged:
        return policy.merge_and_unload()
    if weights_dtype(policy) != "float32":  # on a float32 base every trainable parameter is float32 already
        from thai_grpo.models.upcast import upcast_trainable

        upcast_trainable(policy)
    return policy
