"""Helpers for tests that run the workflow: a scratch copy of it, Snakemake called as a user would (offline), config
files merged as Snakemake merges them, and the report's fixture."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from thai_grpo.workflow import deep_merge

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ["Snakefile", "rules", "scripts", "config", "report", "envs", "profiles", "data", "assets"]
FIXTURES = REPO / "tests" / "fixtures"
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}


def merged_configs(paths) -> dict:
    """YAML config files merged in order, key by key, as Snakemake merges them."""
    return functools.reduce(deep_merge, (yaml.safe_load(Path(path).read_text(encoding="utf-8")) for path in paths), {})


def copy_workflow(target: Path) -> Path:
    """The workflow's files (not results/) copied into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        source = REPO / name
        if not source.exists():  # assets/: the shipped base, once `make ship-base` has made it
            continue
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target / name)
    return target


def snakemake_call(*args: str, env: dict | None = None) -> tuple[list[str], dict]:
    """(argv, environment) of ``snakemake --cores 1 ARGS``, offline, as a user calls it."""
    return [sys.executable, "-m", "snakemake", "--cores", "1", *args], {**os.environ, **OFFLINE_ENV, **(env or {})}


# What only reads the workflow and its metadata: runs in the test's own process (``snakemake_in_process``).
READ_ONLY = ("-n", "--dry-run", "--summary", "--touch")


def run_snakemake(workdir: Path, *args: str, timeout: int = 1800, env: dict | None = None,
                  in_process: bool | None = None) -> subprocess.CompletedProcess:
    """``snakemake --cores 1 ARGS`` in ``workdir``, offline; put targets before ``--configfile`` (it takes many).
    A dry-run, a summary or a touch runs in this process (``snakemake_in_process``: the same command line, parse,
    checks and DAG, without a new interpreter) unless ``in_process`` is False; every other call is a process of its
    own, as a user starts it."""
    if in_process is None:
        in_process = any(arg in READ_ONLY for arg in args)
    if in_process:
        return snakemake_in_process(workdir, *args, env=env)
    argv, environment = snakemake_call(*args, env=env)
    return subprocess.run(argv, cwd=workdir, env=environment, capture_output=True, text=True, timeout=timeout)


def snakemake_in_process(workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``snakemake --cores 1 ARGS`` through Snakemake's own command line (``snakemake.cli.main``) in this process, in
    ``workdir``, with ``env`` (and the offline settings) in the environment while it runs: what a subprocess would
    print and return, at a third of its cost (no interpreter start, Snakemake's imports paid once per worker)."""
    import contextlib
    import io

    from snakemake.cli import main

    argv = ["--cores", "1", *args]
    out, err, code = io.StringIO(), io.StringIO(), 0
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    for key, value in {**OFFLINE_ENV, **(env or {})}.items():  # None: unset it
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    os.chdir(workdir)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(argv)
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                if isinstance(exit_.code, str):  # the interpreter prints sys.exit's message to stderr
                    print(exit_.code, file=sys.stderr)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["snakemake", *argv], code, out.getvalue(), err.getvalue())


def scheduled_jobs(done: subprocess.CompletedProcess) -> dict[str, int]:
    """{rule: job count} from a dry-run's "Job stats" table; {} when there is nothing to be done."""
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    if "Nothing to be done" in out:
        return {}
    table = out.split("Job stats:")[1].split("\n\n")[0]
    return {line.split()[0]: int(line.split()[1]) for line in table.splitlines()[3:]
            if line.split() and line.split()[0] != "total"}


def placeholder_run(workdir: Path, *targets: str) -> Path:
    """Every output of ``targets`` (with their ``--configfile``) an empty placeholder in ``workdir``, marked up to date
    by ``--touch --forceall``: Snakemake's metadata then holds every job's params, as after a real run, and a dry-run
    shows what a config change reruns."""
    summary = run_snakemake(workdir, "--summary", *targets)
    assert summary.returncode == 0, summary.stderr[-3000:]
    for line in summary.stdout.splitlines()[1:]:
        path = workdir / line.split("\t")[0]
        if path.suffix:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        else:
            path.mkdir(parents=True, exist_ok=True)
    touched = run_snakemake(workdir, "--touch", "--forceall", *targets)
    assert touched.returncode == 0, touched.stderr[-3000:]
    return workdir


def write_extra_set_config(workdir: Path, name: str = "mgsm_th", rows: list[dict] | None = None) -> Path:
    """A config file (merged after config/smoke.yaml) adding a second held-out set ``name``: a local copy of the
    MGSM-format stand-in tests/fixtures/mgsm_th_small.jsonl, plus ``rows`` when given."""
    data = workdir / "extra" / f"{name}.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    extra = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows or [])
    data.write_text((FIXTURES / "mgsm_th_small.jsonl").read_text(encoding="utf-8") + extra, encoding="utf-8")
    config = workdir / f"extra_{name}.yaml"
    spec = {"title": "MGSM Thai (stand-in)", "source": "local", "path": str(data), "split": "test",
            "question_column": "question", "answer_column": "answer_number"}
    config.write_text(json.dumps({"eval": {"extra_sets": {name: spec}}}, ensure_ascii=False), encoding="utf-8")
    return config


def load_report_fixture() -> tuple[dict, dict[str, list[dict]]]:
    """results_small.json and samples_small.jsonl grouped by their ``model`` field."""
    results = json.loads((FIXTURES / "results_small.json").read_text(encoding="utf-8"))
    samples: dict[str, list[dict]] = {}
    for line in (FIXTURES / "samples_small.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        samples.setdefault(record.pop("model"), []).append(record)
    return results, samples
