"""How large a step each method took: Dr.GRPO's gradients are smaller than GRPO's but AdamW largely cancels a constant
scale, so both the gradient (``mean_grad_norm``) and the step ||theta_final - theta_SFT||_2 are measured."""

from __future__ import annotations

from pathlib import Path

import numpy as np

ADAPTER_FILE = "adapter_model.safetensors"


def mean_grad_norm(train: dict) -> float | None:
    """Mean per-step ``grad_norm`` of a train.json: its steps' (PPO), else TRL's log history's; None if neither."""
    values = [s["grad_norm"] for s in train.get("steps") or [] if s.get("grad_norm") is not None]
    if not values:
        values = [e["grad_norm"] for e in train.get("trl_log_history") or [] if e.get("grad_norm") is not None]
    return float(np.mean(values)) if values else None


def parameter_displacement(final: dict, start: dict) -> float:
    """sqrt(sum_k ||final[k] - start[k]||_F^2) over the tensors both adapters hold (the same LoRA modules)."""
    shared = sorted(set(final) & set(start))
    if not shared:
        raise ValueError("the two adapters share no tensor names: they are not the same LoRA modules")
    mismatched = [k for k in shared if np.shape(final[k]) != np.shape(start[k])]
    if mismatched:
        raise ValueError(f"{mismatched[0]}: shape {np.shape(final[mismatched[0]])} against "
                         f"{np.shape(start[mismatched[0]])}: the adapters have different LoRA ranks or targets")
    return float(np.sqrt(sum(np.sum((np.asarray(final[k], float) - np.asarray(start[k], float)) ** 2)
                             for k in shared)))


def lora_tensors(adapter_dir: str | Path) -> dict:
    """The LoRA A and B tensors of a saved PEFT adapter (``adapter_model.safetensors``), as float64 arrays."""
    from safetensors.numpy import load_file

    tensors = load_file(str(Path(adapter_dir) / ADAPTER_FILE))
    return {k: v.astype(np.float64) for k, v in tensors.items() if "lora_" in k}


def adapter_displacements(adapters: dict, start_dir: str | Path) -> dict:
    """``{run: ||adapter - start||}`` against the adapter in ``start_dir``; None where the modules differ."""
    start = lora_tensors(start_dir)
    out = {}
    for run, path in adapters.items():
        try:
            out[run] = parameter_displacement(lora_tensors(path), start)
        except (ValueError, FileNotFoundError):
            out[run] = None
    return out
