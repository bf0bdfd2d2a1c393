"""The shipped base and SFT adapter (``base.source: shipped``): the offline default loads them instead of
pretraining, and refuses a run that differs from their record (``built_by.json``) before any training."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from thai_grpo.core.config import ConfigError
from thai_grpo.core.io import plain_json

MANIFEST = "built_by.json"
BASE_DIR, ADAPTER_DIR = "base", "sft_adapter"
REBUILD_HINT = ("rebuild it with `snakemake --cores 2 base` then `make ship-base`, or build it inside the run with "
                "base.source: scratch and sft.source: train")


def rows_sha256(rows: list[dict]) -> str:
    """A hash of rows (each as canonical JSON, one a line): independent of key order and of the file's bytes."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


def data_record(pretrain_rows: list[dict], sft_rows: list[dict]) -> dict:
    return {"pretrain_rows": len(pretrain_rows), "pretrain_sha256": rows_sha256(pretrain_rows),
            "sft_rows": len(sft_rows), "sft_sha256": rows_sha256(sft_rows)}


def first_difference(built: object, wanted: object, path: str = "") -> str | None:
    """The first key path (``base.pretrain.max_steps``) where two JSON values differ, with both values; else None."""
    if isinstance(built, dict) and isinstance(wanted, dict):
        for key in sorted(set(built) | set(wanted)):
            where = f"{path}.{key}" if path else key
            if key not in built or key not in wanted:
                return f"{where}: shipped {built.get(key, '(absent)')!r}, config {wanted.get(key, '(absent)')!r}"
            found = first_difference(built[key], wanted[key], where)
            if found:
                return found
        return None
    return None if built == wanted else f"{path}: shipped {built!r}, config {wanted!r}"


def check_recipe(manifest: dict, wanted: dict) -> None:
    """Refuse the shipped files when the config's recipe would build a different base or adapter (no data read)."""
    difference = first_difference(manifest["recipe"], plain_json(wanted))
    if difference:
        raise ConfigError(f"base.source=shipped: the shipped base was built with other settings ({difference}); "
                          + REBUILD_HINT)


def check_data(manifest: dict, pretrain_rows: list[dict], sft_rows: list[dict]) -> None:
    """Refuse the shipped files when the pretraining or SFT rows differ from those that built them."""
    ours = data_record(pretrain_rows, sft_rows)
    for name in ("pretrain", "sft"):
        if ours[f"{name}_sha256"] != manifest["data"][f"{name}_sha256"]:
            raise ConfigError(f"base.source=shipped: the {name} set ({ours[f'{name}_rows']} rows) differs from the "
                              f"one that built the shipped base ({manifest['data'][f'{name}_rows']} rows); "
                              + REBUILD_HINT)


def read_manifest(folder: str | Path) -> dict:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"base.source=shipped: {path} is missing (the shipped folder is incomplete); "
                          + REBUILD_HINT)
    return json.loads(path.read_text(encoding="utf-8"))


def file_sha256(path: str | Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def check_files(folder: str | Path, manifest: dict) -> None:
    """Refuse a shipped folder whose files differ from those recorded when it was made (an edit or a bad copy)."""
    folder = Path(folder)
    for name, sha in manifest["files"].items():
        if not (folder / name).is_file() or file_sha256(folder / name) != sha:
            raise ConfigError(f"base.source=shipped: {folder / name} is missing or differs from the file shipped "
                              f"(built_by.json); restore it (git checkout {folder}) or " + REBUILD_HINT)
