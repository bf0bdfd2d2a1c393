"""Atomic file output: every file a rule writes appears whole or not at all (write, then rename)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

# A training record's counts of lost and redone updates (methods.recorder writes them, the report reads).
UPDATE_COUNTS = ("optimizer_steps_skipped", "nonfinite_grad_steps", "scaler_redos")


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, fsync it, rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes files private; outputs get the usual permissions
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: str | Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


def plain_json(value):
    """The JSON form of a value (tuples -> lists, keys -> str), so a recipe compares equal to its stored copy."""
    return json.loads(json.dumps(value, sort_keys=True, ensure_ascii=False))


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def read_jsonl(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_appended_jsonl(path: str | Path) -> list[dict]:
    """The lines of a JSONL file a job appends to ([] before it exists); a last line cut short by a kill is dropped."""
    path = Path(path)
    if not path.exists():
        return []
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    records = []
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number < len(lines):
                raise
    return records


@contextlib.contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``path``; on success it replaces ``path`` whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def progress(message: str) -> None:
    """One progress line into the rule's log and, while ``log_to`` holds stdout, onto the terminal too."""
    import sys

    print(message, flush=True)
    if sys.stdout is not sys.__stdout__ and sys.__stderr__ is not None:
        sys.__stderr__.write(message + "\n")
        sys.__stderr__.flush()


def require_model_dir(path: str | Path, kind: str) -> Path:
    """Fail early, naming the path, when a model or adapter folder is incomplete."""
    path = Path(path)
    config_name = "adapter_config.json" if kind == "adapter" else "config.json"
    if not (path / config_name).is_file():
        raise FileNotFoundError(f"{kind} folder {path} has no {config_name}: rerun the stage that writes it "
                                f"(delete {path} and run snakemake again) or fix the path in the config")
    if not any(path.glob("*.safetensors")):
        raise FileNotFoundError(f"{kind} folder {path} has no .safetensors weights (only safetensors are "
                                "loaded): rerun the stage that writes it")
    return path
