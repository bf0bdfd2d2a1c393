"""This machine's NVIDIA GPUs: how many a job sees, one of its own per model job (TRL refuses ``nn.DataParallel``)
and the compute capability it acts on. Imported only where ``nvidia-smi`` is installed."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

CAPABILITY_ENV = "THAI_GRPO_CAPABILITY"  # e.g. "7.5": act as a T4 (float16, fp16=True) on a newer GPU
HIDDEN = ("", "-1", "none", "void", "nodevfiles")  # CUDA_VISIBLE_DEVICES values that hide every GPU
GPU_SLOTS = Path(".snakemake") / "gpu_slots"  # one lock file per slot, in the workflow's directory (jobs' cwd)
CUDA_PEAKS_ENV = "THAI_GRPO_CUDA_PEAKS"  # a folder where each job writes its peak CUDA memory (tools/memory_plan.py)


def gpus_listed(nvidia_smi_list: str) -> int:
    """GPUs in the output of ``nvidia-smi -L`` (MIG instances, listed beneath their GPU, not counted)."""
    return sum(1 for line in nvidia_smi_list.splitlines() if line.startswith("GPU "))


def listed_devices(visible: str | None) -> list[str] | None:
    """The devices ``CUDA_VISIBLE_DEVICES`` lists, [] when it hides every GPU, None when unset."""
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
    """(the lowest slot no running process holds, its open file): the kernel drops the ``flock`` when the process
    ends, a crash or kill included, so no slot is left taken."""
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
    """Leave this job one GPU before CUDA initialises (a slot's where it sees several); returns what it set."""
    devices = visible_gpus(environ)
    if len(devices) <= 1:
        return pin_one_device(environ)
    slot, handle = claim_gpu_slot(folder)
    _HELD_SLOTS.append(handle)
    environ["CUDA_VISIBLE_DEVICES"] = slot_device(slot, devices)
    return environ["CUDA_VISIBLE_DEVICES"]


def acting_capability(real: tuple[int, int] | None, requested: str | None) -> tuple[int, int] | None:
    """The GPU's own capability, or a lower ``requested`` one (a newer GPU runs a T4's float16 path)."""
    if not requested:
        return real
    try:
        wanted = major, minor = tuple(int(part) for part in requested.strip().split("."))
    except ValueError:
        raise ValueError(f"{CAPABILITY_ENV}={requested!r}: give a compute capability as MAJOR.MINOR, e.g. 7.5 (a T4's "
                         "float16 path) or 8.0 (bfloat16)") from None
    if real is None:
        raise RuntimeError(f"{CAPABILITY_ENV}={requested} needs a CUDA GPU; unset it on a machine without one")
    if wanted > tuple(real):
        raise RuntimeError(f"{CAPABILITY_ENV}={requested} is above this GPU's own {real[0]}.{real[1]}: only a lower "
                           "capability can be acted (e.g. 7.5 on an A100 or H100); unset it")
    return wanted


def gpu_capability() -> tuple[int, int] | None:
    """The compute capability this job acts on, or None without a CUDA GPU; pins one GPU first, so it must run
    before anything initialises CUDA."""
    pin_one_device()
    import torch

    if not torch.cuda.is_available():
        return acting_capability(None, os.environ.get(CAPABILITY_ENV))
    if torch.cuda.device_count() > 1:
        raise RuntimeError(f"this job sees {torch.cuda.device_count()} GPUs although CUDA_VISIBLE_DEVICES="
                           f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}: CUDA was initialised before the job pinned "
                           "itself to one; TRL's trainers refuse nn.DataParallel. Set CUDA_VISIBLE_DEVICES=0")
    return acting_capability(tuple(torch.cuda.get_device_capability(0)), os.environ.get(CAPABILITY_ENV))


def cuda_peak_writer(log_path: str):
    """Where ``THAI_GRPO_CUDA_PEAKS`` names a folder, a function writing this job's peak CUDA memory there."""
    folder = os.environ.get(CUDA_PEAKS_ENV)
    if not folder:
        return None

    def write() -> None:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            Path(folder).mkdir(parents=True, exist_ok=True)
            record = {"job": Path(log_path).stem, "max_allocated_gib": torch.cuda.max_memory_allocated() / 2 ** 30,
                      "max_reserved_gib": torch.cuda.max_memory_reserved() / 2 ** 30}
            (Path(folder) / f"{record['job']}.json").write_text(json.dumps(record))

    return write
