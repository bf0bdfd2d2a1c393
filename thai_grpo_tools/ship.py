"""`make ship-base`'s builder: the shipped base and SFT adapter (``assets/tiny-base/``) recreated from a scratch build,
with ``built_by.json``, the record ``thai_grpo.core.shipped`` checks a run against."""

from __future__ import annotations

from pathlib import Path

from thai_grpo.core.hub import copy_allowed
from thai_grpo.core.io import atomic_directory, require_model_dir, write_json
from thai_grpo.core.shipped import ADAPTER_DIR, BASE_DIR, MANIFEST, data_record, file_sha256
from thai_grpo.workflow import recipe


def build_manifest(config: dict, system_prompt: str, pretrain_rows: list[dict], sft_rows: list[dict],
                   commit: str, files: dict[str, str]) -> dict:
    """What ``built_by.json`` holds: the recipe, the data hashes, the commit that built the files, their hashes."""
    return {"recipe": recipe(config, system_prompt), "data": data_record(pretrain_rows, sft_rows),
            "commit": commit, "files": dict(sorted(files.items()))}


def ship(base_dir: str | Path, adapter_dir: str | Path, out_dir: str | Path, config: dict, system_prompt: str,
         pretrain_rows: list[dict], sft_rows: list[dict], commit: str) -> dict:
    """(Re)create the shipped folder: ``base/`` and ``sft_adapter/`` (the hub-style files only: safetensors weights,
    configs, tokenizer) and ``built_by.json``. Replaces ``out_dir`` whole; returns the manifest."""
    with atomic_directory(out_dir) as tmp:
        for source, name, kind in ((base_dir, BASE_DIR, "base model"), (adapter_dir, ADAPTER_DIR, "adapter")):
            copy_allowed(require_model_dir(source, kind), tmp / name)
        files = {p.relative_to(tmp).as_posix(): file_sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        manifest = build_manifest(config, system_prompt, pretrain_rows, sft_rows, commit, files)
        write_json(tmp / MANIFEST, manifest)
    return manifest
