"""Where a model job runs and in which precision: the config's ``device`` against what torch sees, the dtype from the
compute capability (None on a CPU). ``thai_grpo.jobs.gpus`` is imported only where NVIDIA's driver is."""

from __future__ import annotations

import os
import shutil

DEVICE_SETTINGS = ("auto", "cuda", "cpu")  # the config's top-level `device`
JOBS_PER_GPU_ENV = "THAI_GRPO_JOBS_PER_GPU"  # how many model jobs share one card (the workflow sets it: jobs_per_card)
ALLOCATOR = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}  # CUDA's allocator grows segments: less waste


def choose_dtype(compute_capability: tuple[int, int] | None) -> str:
    """float32 on CPU; float16 before Ampere (sm < 8.0, e.g. a T4: bf16 only emulated); bfloat16 from Ampere on."""
    if compute_capability is None:
        return "float32"
    return "bfloat16" if tuple(compute_capability) >= (8, 0) else "float16"


def has_nvidia_driver(environ=os.environ) -> bool:
    """Whether ``nvidia-smi`` is on the ``PATH``."""
    return shutil.which("nvidia-smi", path=environ.get("PATH")) is not None


def local_gpu_count(environ=os.environ) -> int:
    """NVIDIA GPUs the jobs started from here could use (``gpus.visible_gpus``)."""
    if not has_nvidia_driver(environ):
        return 0
    from thai_grpo.jobs.gpus import visible_gpus

    return len(visible_gpus(environ))


def local_gpu_limit(environ=os.environ) -> dict | None:
    """The default profile's ``resources``: ``{"gpu": N}`` for this machine's N GPUs, None (no limit) without one."""
    count = local_gpu_count(environ)
    return {"gpu": count} if count > 0 else None


def jobs_per_card(gpu_limit: int | None, gpus: int) -> int:
    """How many model jobs share one card: Snakemake's ``gpu`` limit over the GPUs present, rounded up (default 1)."""
    if not gpu_limit or gpus < 1:
        return 1
    return max(1, -(-int(gpu_limit) // gpus))


def choose_job_device(setting: str, base_source: str, cuda_available: bool, torch_version: str,
                      cuda_build: str | None = None) -> str:
    """``"cuda"`` or ``"cpu"`` from the config's ``device``, ``base.source`` and torch; a one-line ``RuntimeError``
    where ``cuda``, or ``auto`` with a hub base (days on a CPU), finds no GPU."""
    if setting not in DEVICE_SETTINGS:
        raise ValueError(f"device: {setting!r}: use one of {', '.join(DEVICE_SETTINGS)}")
    if setting == "cpu":
        return "cpu"
    if cuda_available:
        return "cuda"
    if setting == "cuda" or base_source == "hub":
        needs = "`device: cuda` needs one" if setting == "cuda" else f"a {base_source} base (the real model) needs one"
        build = f"built for CUDA {cuda_build}" if cuda_build else "a CPU build"
        raise RuntimeError(f"this job's torch sees no CUDA GPU (torch {torch_version}, {build}): {needs}; "
                           "install a CUDA build of torch on a GPU machine, or set `device: cpu` to run on the CPU "
                           "anyway (slow: days)")
    return "cpu"


def start_model_job(config: dict, environ=os.environ) -> str:
    """A model job's first step, before any CUDA: ``device: cpu`` hides every GPU, else the job gets one of its own
    (``gpus.pin_job_gpu``). Returns ``"cuda"`` or ``"cpu"``, or exits with one line."""
    setting, source = config["device"], config["base"]["source"]
    if setting == "cpu":
        environ["CUDA_VISIBLE_DEVICES"] = ""
    else:
        if has_nvidia_driver(environ):
            from thai_grpo.jobs.gpus import pin_job_gpu

            pin_job_gpu(environ)
        for key, value in ALLOCATOR.items():  # read when CUDA initialises: before any tensor
            environ.setdefault(key, value)
    import torch

    try:
        return choose_job_device(setting, source, torch.cuda.is_available(), torch.__version__, torch.version.cuda)
    except (RuntimeError, ValueError) as error:
        raise SystemExit(f"device: {error}") from None


def current_capability() -> tuple[int, int] | None:
    """The compute capability this job acts on (``gpus.gpu_capability``), None without NVIDIA's driver."""
    if not has_nvidia_driver():
        return None
    from thai_grpo.jobs.gpus import gpu_capability

    return gpu_capability()


def job_device() -> str:
    """``"cuda"`` (the one GPU this job is pinned to) or ``"cpu"``."""
    return "cpu" if current_capability() is None else "cuda"
