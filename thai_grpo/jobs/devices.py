"""Where a job runs and in which precision. Per-GPU settings are pure functions of the compute capability ((7, 5) T4,
(8, 0) A100, (9, 0) H100; None on a CPU), so tests cover every GPU without one. Each model job is pinned to one GPU
before CUDA starts (``start_model_job``): TRL's trainers refuse ``nn.DataParallel``."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

CAPABILITY_ENV = "THAI_GRPO_CAPABILITY"  # e.g. "7.5": act as a T4 (float16, fp16=True) on a newer GPU
HIDDEN = ("", "-1", "none", "void", "nodevfiles")  # CUDA_VISIBLE_DEVICES values that hide every GPU
DEVICE_SETTINGS = ("auto", "cuda", "cpu")  # the config's top-level `device`
GPU_SLOTS = Path(".snakemake") / "gpu_slots"  # one lock file per slot, in the workflow's directory (jobs' cwd)
JOBS_PER_GPU_ENV = "THAI_GRPO_JOBS_PER_GPU"  # how many model jobs share one card (the workflow sets it: jobs_per_card)
ALLOCATOR = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}  # CUDA's allocator grows segments: less waste


def choose_dtype(compute_capability: tuple[int, int] | None) -> str:
    """float32 on CPU; float16 before Ampere (sm < 8.0, e.g. a T4: no native bf16, although
    ``torch.cuda.is_bf16_supported()`` says True through emulation); bfloat16 from Ampere on."""
    if compute_capability is None:
        return "float32"
    return "bfloat16" if tuple(compute_capability) >= (8, 0) else "float16"


def device_dtype() -> str:
    """``choose_dtype`` of this machine."""
    return choose_dtype(current_capability())


# ----------------------------------------------------------------------------------------- this machine's GPUs
def gpus_listed(nvidia_smi_list: str) -> int:
    """GPUs in the output of ``nvidia-smi -L`` (MIG instances, listed beneath their GPU, not counted)."""
    return sum(1 for line in nvidia_smi_list.splitlines() if line.startswith("GPU "))


def listed_devices(visible: str | None) -> list[str] | None:
    """The devices ``CUDA_VISIBLE_DEVICES`` lists (indices, UUIDs or MIG ids), [] when it hides every GPU, None
    when it is unset."""
    if visible is None:
        return None
    if visible.strip().lower() in HIDDEN:
        return []
    return [device.strip() for device in visible.split(",") if device.strip()]


def nvidia_smi_gpus(environ=os.environ) -> int:
    """GPUs ``nvidia-smi -L`` lists, 0 where it is missing or fails (no CUDA initialised, no torch imported)."""
    binary = shutil.which("nvidia-smi", path=environ.get("PATH"))
    if binary is None:
        return 0
    try:
        done = subprocess.run([binary, "-L"], capture_output=True, text=True, timeout=30, env=dict(environ))
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return gpus_listed(done.stdout) if done.returncode == 0 else 0


def visible_gpus(environ=os.environ) -> list[str]:
    """The GPUs a job started here may use, as ``CUDA_VISIBLE_DEVICES`` entries (``nvidia-smi``'s indices if unset)."""
    present = nvidia_smi_gpus(environ)
    listed = listed_devices(environ.get("CUDA_VISIBLE_DEVICES"))
    if present == 0:
        return []
    return [str(index) for index in range(present)] if listed is None else listed


def local_gpu_count(environ=os.environ) -> int:
    """NVIDIA GPUs the jobs started from here could use (``visible_gpus``)."""
    return len(visible_gpus(environ))


def gpu_limit(gpu_count: int) -> dict | None:
    """Snakemake's ``resources`` for ``gpu_count`` GPUs: ``{"gpu": gpu_count}``, None (no limit) without a GPU."""
    return {"gpu": gpu_count} if gpu_count > 0 else None


def local_gpu_limit() -> dict | None:
    """``gpu_limit`` of this machine (``--resources gpu=N`` overrides it)."""
    return gpu_limit(local_gpu_count())


def one_device(visible: str | None) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` leaving a job one GPU (the first listed, ``"0"`` if unset), or None to leave it."""
    devices = listed_devices(visible)
    if devices is None:
        return "0"
    return devices[0] if len(devices) > 1 else None


def pin_one_device(environ=os.environ) -> str | None:
    """Narrow ``CUDA_VISIBLE_DEVICES`` to one GPU (``one_device``) before CUDA initialises; returns what it set."""
    pinned = one_device(environ.get("CUDA_VISIBLE_DEVICES"))
    if pinned is not None:
        environ["CUDA_VISIBLE_DEVICES"] = pinned
    return pinned


_HELD_SLOTS: list = []  # the open lock files of this process's claimed slots: released when it ends, however


def claim_gpu_slot(folder: str | Path = GPU_SLOTS):
    """(the lowest slot no running process holds, the open file whose exclusive ``flock`` holds it): the kernel drops
    the lock when the process ends, a crash or a kill included, so no slot is ever left taken."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    slot = 0
    while True:
        handle = open(folder / f"slot-{slot}.lock", "a+", encoding="utf-8")  # noqa: SIM115 - held until exit
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            slot += 1
            continue
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")  # who holds it, for a person looking
        handle.flush()
        return slot, handle


def slot_device(slot: int, devices: list[str]) -> str:
    """The GPU of slot i: ``devices[i % len(devices)]`` (with ``--resources gpu=2N`` two jobs share each card)."""
    return devices[slot % len(devices)]


def pin_job_gpu(environ=os.environ, folder: str | Path = GPU_SLOTS) -> str | None:
    """Leave this job one GPU of its own before CUDA initialises: a slot's device (``claim_gpu_slot``) where it sees
    several, else ``pin_one_device``. Returns what it set, or None."""
    devices = visible_gpus(environ)
    if len(devices) <= 1:
        return pin_one_device(environ)
    slot, handle = claim_gpu_slot(folder)
    _HELD_SLOTS.append(handle)
    environ["CUDA_VISIBLE_DEVICES"] = slot_device(slot, devices)
    return environ["CUDA_VISIBLE_DEVICES"]


def jobs_per_card(gpu_limit: int | None, gpus: int) -> int:
    """How many model jobs share one card: Snakemake's ``gpu`` limit over the GPUs present, rounded up (default 1)."""
    if not gpu_limit or gpus < 1:
        return 1
    return max(1, -(-int(gpu_limit) // gpus))


def jobs_per_gpu(environ=os.environ) -> int:
    """``jobs_per_card`` as the workflow recorded it (``THAI_GRPO_JOBS_PER_GPU``), 1 when unset."""
    value = environ.get(JOBS_PER_GPU_ENV, "1")
    return int(value) if value.isdigit() and int(value) >= 1 else 1


def torch_build(torch_version: str, cuda_build: str | None) -> str:
    """``torch 2.13.0+cpu, a CPU build`` / ``torch 2.5.1+cu124, built for CUDA 12.4``."""
    return f"torch {torch_version}, " + (f"built for CUDA {cuda_build}" if cuda_build else "a CPU build")


def choose_job_device(setting: str, base_source: str, cuda_available: bool, torch_version: str,
                      cuda_build: str | None = None) -> str:
    """``"cuda"`` or ``"cpu"`` for a model job, from the config's ``device``, ``base.source`` and what torch sees; a
    one-line ``RuntimeError`` where ``cuda``, or ``auto`` with a hub base (days on a CPU), finds no GPU."""
    if setting not in DEVICE_SETTINGS:
        raise ValueError(f"device: {setting!r}: use one of {', '.join(DEVICE_SETTINGS)}")
    if setting == "cpu":
        return "cpu"
    if cuda_available:
        return "cuda"
    if setting == "cuda" or base_source == "hub":
        needs = "`device: cuda` needs one" if setting == "cuda" else f"a {base_source} base (the real model) needs one"
        raise RuntimeError(f"this job's torch sees no CUDA GPU ({torch_build(torch_version, cuda_build)}): {needs}; "
                           "install a CUDA build of torch on a GPU machine, or set `device: cpu` to run on the CPU "
                           "anyway (slow: days)")
    return "cpu"


def start_model_job(config: dict, environ=os.environ) -> str:
    """The first thing every model job does, before any model or CUDA: ``device: cpu`` hides every GPU, else the job
    gets a GPU of its own (``pin_job_gpu``). Returns ``"cuda"`` or ``"cpu"``, or exits with one line."""
    setting, source = config["device"], config["base"]["source"]
    if setting == "cpu":
        environ["CUDA_VISIBLE_DEVICES"] = ""
    else:
        pin_job_gpu(environ)
        for key, value in ALLOCATOR.items():  # read when CUDA initialises: before any tensor
            environ.setdefault(key, value)
    import torch

    try:
        return choose_job_device(setting, source, torch.cuda.is_available(), torch.__version__, torch.version.cuda)
    except (RuntimeError, ValueError) as error:
        raise SystemExit(f"device: {error}") from None


def parse_capability(text: str) -> tuple[int, int]:
    """``"7.5"`` -> (7, 5); a clear error for anything else."""
    try:
        major, minor = (int(part) for part in text.strip().split("."))
    except ValueError:
        raise ValueError(f"{CAPABILITY_ENV}={text!r}: give a compute capability as MAJOR.MINOR, e.g. 7.5 (a T4's "
                         "float16 path) or 8.0 (bfloat16)") from None
    return major, minor


def acting_capability(real: tuple[int, int] | None, requested: str | None) -> tuple[int, int] | None:
    """The capability the pipeline acts on: the GPU's own, or a lower ``requested`` one (``THAI_GRPO_CAPABILITY``: a
    newer GPU runs a T4's float16 path)."""
    if not requested:
        return real
    wanted = parse_capability(requested)
    if real is None:
        raise RuntimeError(f"{CAPABILITY_ENV}={requested} needs a CUDA GPU; unset it on a machine without one")
    if wanted > tuple(real):
        raise RuntimeError(f"{CAPABILITY_ENV}={requested} is above this GPU's own {real[0]}.{real[1]}: only a lower "
                           "capability can be acted (e.g. 7.5 on an A100 or H100); unset it")
    return wanted


def current_capability() -> tuple[int, int] | None:
    """The compute capability this job acts on, or None without CUDA. It pins the job to one GPU first, so it must run
    before anything else initialises CUDA."""
    pin_one_device()
    import torch

    if not torch.cuda.is_available():
        return acting_capability(None, os.environ.get(CAPABILITY_ENV))
    if torch.cuda.device_count() > 1:
        raise RuntimeError(f"this job sees {torch.cuda.device_count()} GPUs although CUDA_VISIBLE_DEVICES="
                           f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}: CUDA was initialised before the job pinned "
                           "itself to one; TRL's trainers refuse nn.DataParallel. Set CUDA_VISIBLE_DEVICES=0")
    return acting_capability(tuple(torch.cuda.get_device_capability(0)), os.environ.get(CAPABILITY_ENV))


def evaluation_precision(dtype: str, device) -> dict:
    """The device's name and float32 matmul precision an evaluation computes in. A float32 evaluation refuses TF32
    matmuls: their 10-bit mantissa errs as much as the chapter's whole update."""
    import torch

    device = torch.device(device)
    precision = torch.get_float32_matmul_precision()
    if dtype == "float32" and (precision != "highest" or torch.backends.cuda.matmul.allow_tf32):
        raise RuntimeError(f"a float32 evaluation with TF32 matmuls on (float32 matmul precision {precision!r}, "
                           f"allow_tf32={torch.backends.cuda.matmul.allow_tf32}) computes with float16's mantissa: "
                           "turn TF32 off (torch.set_float32_matmul_precision('highest'))")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"device": name, "matmul_precision": precision if dtype == "float32" else f"{dtype} weights"}


def job_device() -> str:
    """``"cuda"`` (the one GPU this job is pinned to) or ``"cpu"``."""
    return "cpu" if current_capability() is None else "cuda"
