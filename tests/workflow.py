"""Helpers for tests that run the workflow: a scratch copy of it, Snakemake called as a user would (offline),
and the report's fixture."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ["Snakefile", "rules", "scripts", "config", "report", "envs", "profiles"]
FIXTURES = REPO / "tests" / "fixtures"
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}


def copy_workflow(target: Path) -> Path:
    """The workflow's files (not results/) copied into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target / name)
    return target


def run_snakemake(workdir: Path, *args: str, timeout: int = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """``snakemake --cores 1 ARGS`` in ``workdir``, offline; put targets before ``--configfile`` (it takes many)."""
    environment = {**os.environ, **OFFLINE_ENV, **(env or {})}
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args], cwd=workdir, env=environment,
                          capture_output=True, text=True, timeout=timeout)


def load_report_fixture() -> tuple[dict, dict[str, list[dict]]]:
    """results_small.json and samples_small.jsonl grouped by their ``model`` field."""
    results = json.loads((FIXTURES / "results_small.json").read_text(encoding="utf-8"))
    samples: dict[str, list[dict]] = {}
    for line in (FIXTURES / "samples_small.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        samples.setdefault(record.pop("model"), []).append(record)
    return results, samples
