"""Safe loading of base models and LoRA adapters (the hub's and the offline ``tiny_base`` leave the same folders)."""

from __future__ import annotations

from pathlib import Path

from thai_grpo.jobs.devices import choose_dtype, current_capability
from thai_grpo.core.io import require_model_dir


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


def merge_keeps_update(dtype: str) -> bool:
    """Whether folding a small adapter update into base weights of ``dtype`` keeps it (``MERGE_KEEPS_UPDATE``)."""
    return resolved_dtype_name(dtype) in MERGE_KEEPS_UPDATE


def weights_dtype(model) -> str:
    """The dtype the model's base weights were loaded in (its input embedding's), e.g. ``"bfloat16"``."""
    return str(model.get_input_embeddings().weight.dtype).removeprefix("torch.")


def load_tokenizer(path: str | Path):
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
    trainable adapter stays float32 (``upcast_trainable``: fp16's scaler unscales its gradients). ``merged``: a frozen
    adapter folded into the base weights (W + BA), a plain model."""
    from peft import PeftModel

    base = load_base_model(base_path, dtype)
    if adapter_path is None:
        return base
    require_model_dir(adapter_path, "adapter")
    policy = PeftModel.from_pretrained(base, str(adapter_path), is_trainable=trainable and not merged)
    return policy.merge_and_unload() if merged else upcast_trainable(policy)


def load_for_evaluation(base_path: str | Path, adapter_path: str | Path | None, dtype: str = "float32"):
    """The policy an evaluation scores, in eval mode: merged where ``dtype`` keeps a small update (float32)."""
    return load_policy(base_path, adapter_path, dtype=dtype, merged=merge_keeps_update(dtype)).eval()


def upcast_trainable(model):
    """``model`` with every trainable parameter in float32 (PEFT upcasts LoRA's matrices, not a copied score head); an
    upcast module gets float32 inputs (``float32_inputs``): without autocast a 16-bit base would meet a float32 head."""
    import torch

    for module in model.modules():
        own = [p for p in module.parameters(recurse=False) if p.requires_grad and p.dtype != torch.float32]
        for parameter in own:
            parameter.data = parameter.data.float()
        if own:
            module.register_forward_pre_hook(float32_inputs)
    return model


def float32_inputs(module, args):
    """A forward pre-hook: the module's floating-point tensor arguments in float32 (a float32 head on a 16-bit base)."""
    import torch

    return tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
