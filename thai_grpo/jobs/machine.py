"""What a job ran on, at the start of its log: the CPU (AVX2 and AVX-512 give other digits) and the commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

JOB_MACHINE = "job ran on: "  # the prefix of a log's machine line, JSON after it


def lscpu_fields() -> dict[str, str]:
    """``lscpu``'s fields ("Model name", "Flags", ...); empty where lscpu cannot run."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {key.strip(): value.strip() for key, value in (line.split(":", 1) for line in out.splitlines() if ":" in line)}


def cpu_label(model_name: str, flags: list[str]) -> str:
    """'AMD EPYC (AVX-512)': the model name and the widest vector instruction set among ``flags`` (lscpu's)."""
    level = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{model_name} ({level})"


def commit_of(path: str | Path) -> str:
    """The short commit of the checkout holding ``path`` (marked when tracked files differ), or "unknown"."""
    git = ["git", "--no-optional-locks", "-C", str(path)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + (" with uncommitted changes" if dirty.stdout.strip() else "")


def this_cpu() -> str:
    """This machine's ``cpu_label`` from lscpu, or "unknown CPU" where lscpu cannot run."""
    fields = lscpu_fields()
    if not fields:
        return "unknown CPU"
    return cpu_label(fields.get("Model name", "unknown CPU"), fields.get("Flags", "").split())


def this_machine() -> dict:
    """{"cpu": ``this_cpu``, "commit": the working directory's ``commit_of``}: where a job runs."""
    return {"cpu": this_cpu(), "commit": commit_of(".")}
