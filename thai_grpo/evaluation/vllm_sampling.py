"""Held-out sampling through vLLM's offline engine (``eval.use_vllm: true``; off by default: vLLM needs a CUDA GPU):
the same prompts, sampling distribution, record format and dtype as the transformers path, other random streams."""

from __future__ import annotations

import json
import os
from pathlib import Path

from thai_grpo.data.prompts import prompt_token_ids  # vLLM gets token ids, not its own tokenization
from thai_grpo.models.sampling import records_from_completions

# vLLM's accepted max_lora_rank values (LoRAConfig); an adapter of rank r needs the smallest one >= r.
VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.85  # held-out sampling has the GPU to itself
# NVIDIA's switch that keeps cuBLAS and cuDNN from TF32 in every process that inherits it, whatever torch's flags say
# there: vLLM samples in engine processes of its own, out of reach of the torch check in the job's process.
TF32_OVERRIDE = "NVIDIA_TF32_OVERRIDE"


def vllm_sampling_params_kwargs(eval_cfg: dict) -> dict:
    """``SamplingParams`` kwargs of the sampled completions: plain temperature sampling without truncation."""
    return {"n": int(eval_cfg["num_samples"]), "temperature": float(eval_cfg["temperature"]), "top_p": 1.0,
            "top_k": -1, "min_p": 0.0, "max_tokens": int(eval_cfg["max_new_tokens"]), "seed": int(eval_cfg["seed"])}


def vllm_greedy_params_kwargs(eval_cfg: dict) -> dict:
    """``SamplingParams`` kwargs of the one greedy answer per problem (temperature 0 is greedy in vLLM)."""
    return {"n": 1, "temperature": 0.0, "max_tokens": int(eval_cfg["max_new_tokens"]), "seed": int(eval_cfg["seed"])}


def problem_seeds(seed: int, num_problems: int, num_samples: int) -> list[int]:
    """One seed per problem, ``num_samples`` apart: vLLM seeds sample j of a request seeded s with s + j, so every
    (problem, sample) stream is distinct however vLLM batches the requests."""
    return [seed + index * num_samples for index in range(num_problems)]


def vllm_lora_rank(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that holds an adapter of rank ``rank``."""
    for allowed in VLLM_LORA_RANKS:
        if rank <= allowed:
            return allowed
    raise ValueError(f"LoRA rank {rank} exceeds vLLM's largest max_lora_rank {VLLM_LORA_RANKS[-1]}")


def vllm_max_model_len(prompt_lengths: list[int], max_new_tokens: int) -> int:
    """The engine's context: longest prompt plus budget; vLLM's default (the model's full context) may not fit."""
    return max(prompt_lengths) + int(max_new_tokens)


def vllm_engine_kwargs(base_dir: str | Path, dtype: str, seed: int, max_model_len: int,
                       gpu_memory_utilization: float, lora_rank: int | None) -> dict:
    """``vllm.LLM`` kwargs: the local base folder, no remote code, LoRA when an adapter is sampled."""
    kwargs = {"model": str(base_dir), "tokenizer": str(base_dir), "dtype": dtype, "seed": int(seed),
              "max_model_len": int(max_model_len), "gpu_memory_utilization": float(gpu_memory_utilization),
              "trust_remote_code": False}
    if lora_rank is not None:
        kwargs.update(enable_lora=True, max_loras=1, max_lora_rank=vllm_lora_rank(lora_rank))
    return kwargs


def completion_from_tokens(tokenizer, token_ids, finish_reason: str | None) -> dict:
    """One completion ``{text, num_tokens, truncated, token_ids}`` exactly as the transformers path makes it."""
    ids = list(token_ids)
    return {"text": tokenizer.decode(ids, skip_special_tokens=True), "num_tokens": len(ids),
            "truncated": finish_reason != "stop", "token_ids": ids}


def _gpu_capability() -> tuple[int, int] | None:
    """``gpus.acting_capability``, read through vLLM's platform layer (NVML): torch.cuda would initialise CUDA
    here and force vLLM's workers onto the slower 'spawn' start."""
    from thai_grpo.jobs.gpus import CAPABILITY_ENV, acting_capability

    try:
        from vllm.platforms import current_platform

        capability = current_platform.get_device_capability()
        real = None if capability is None else (capability.major, capability.minor)
    except Exception:  # noqa: BLE001 - any failure: let vLLM pick the dtype
        return None
    return acting_capability(real, os.environ.get(CAPABILITY_ENV)) if real else None


def resolve_vllm_dtype(dtype: str, capability: tuple[int, int] | None) -> str:
    """The config's dtype; ``auto`` follows ``devices.choose_dtype``, or vLLM's own ``auto`` for an unknown GPU."""
    from thai_grpo.jobs.devices import choose_dtype

    if dtype != "auto":
        return dtype
    return "auto" if capability is None else choose_dtype(capability)


def engine_dtype(engine, asked: str) -> str:
    """The dtype vLLM loaded the weights in, or ``asked`` where this vLLM version does not expose it."""
    loaded = getattr(getattr(getattr(engine, "llm_engine", None), "model_config", None), "dtype", None)
    return asked if loaded is None else str(loaded).removeprefix("torch.")


def sample_heldout_vllm(base_dir: str | Path, adapter_dir: str | Path | None, rows: list[dict], system_prompt: str,
                        eval_cfg: dict, dtype: str = "auto", progress=None) -> list[dict]:
    """``sample_heldout``'s records, generated by one vLLM engine: all problems at once, samples and greedy."""
    try:
        from vllm import LLM, SamplingParams
        from vllm.lora.request import LoRARequest
    except ImportError as error:
        raise RuntimeError("eval.use_vllm is true but vLLM is not installed: `pip install vllm` on a machine with a "
                           "CUDA GPU, or set eval.use_vllm: false") from error

    from thai_grpo.core.io import require_model_dir
    from thai_grpo.models.loading import load_tokenizer

    require_model_dir(base_dir, "base model")
    tokenizer = load_tokenizer(base_dir)
    prompts = prompt_token_ids(tokenizer, [r["question"] for r in rows], system_prompt,
                               eval_cfg.get("chat_template_kwargs"))
    lora_rank, lora = None, None
    if adapter_dir is not None:
        require_model_dir(adapter_dir, "adapter")
        lora_rank = int(json.loads((Path(adapter_dir) / "adapter_config.json").read_text())["r"])
        lora = LoRARequest("adapter", 1, str(adapter_dir))

    asked = resolve_vllm_dtype(dtype, _gpu_capability())  # eval.dtype, as every evaluation stage
    if asked == "float32":
        os.environ[TF32_OVERRIDE] = "0"  # cuBLAS in vLLM's engine processes, which inherit it: no TF32 matmuls
    engine = LLM(**vllm_engine_kwargs(
        base_dir, asked, eval_cfg["seed"],
        vllm_max_model_len([len(p) for p in prompts], eval_cfg["max_new_tokens"]),
        eval_cfg.get("vllm_gpu_memory_utilization", DEFAULT_GPU_MEMORY_UTILIZATION), lora_rank))
    sampled_kwargs = vllm_sampling_params_kwargs(eval_cfg)
    seeds = problem_seeds(sampled_kwargs["seed"], len(rows), sampled_kwargs["n"])
    params = [SamplingParams(**{**sampled_kwargs, "seed": s}) for s in seeds]
    params += [SamplingParams(**vllm_greedy_params_kwargs(eval_cfg))] * len(rows)
    requests = [{"prompt_token_ids": ids} for ids in prompts] * 2
    if progress:
        progress(f"vLLM: {len(rows)} problems x {sampled_kwargs['n']} samples + 1 greedy each")
    outputs = engine.generate(requests, params, lora_request=lora)  # one result per request, in request order

    def completions(output) -> list[dict]:
        return [completion_from_tokens(tokenizer, c.token_ids, c.finish_reason) for c in output.outputs]

    records = records_from_completions(rows, [completions(o) for o in outputs[:len(rows)]],
                                       [completions(o)[0] for o in outputs[len(rows):]])
    if progress:
        progress(f"sampled {len(records)}/{len(rows)} problems")
    return [{**record, "dtype": engine_dtype(engine, asked)} for record in records]
