"""Fetching the real run's base model and SFT adapter: pinned revisions, safetensors only, no remote code; offline
and not cached, one line saying what to download instead of a library's stack trace."""

from __future__ import annotations

import fnmatch
import shutil
from pathlib import Path

from thai_grpo.core.io import atomic_directory, require_model_dir

# Weights only as safetensors; pickled *.bin / *.pt are never fetched, and neither is remote code (*.py).
ALLOWED_FILES = ["*.json", "*.safetensors", "*.txt", "*.jinja", "*.model", "tokenizer*"]
IGNORED_FILES = ["*.py", "*.bin", "*.pt", "*.pth", "*.pkl", "*.ckpt", "*.h5", "*.msgpack"]

# The config section that names each kind of hub artifact, for the hint's `source: local` alternative.
_LOCAL_ALTERNATIVE = {
    "base model": "base: {{source: local, name_or_path: {dir}}}",
    "adapter": "sft: {{source: local, name_or_path: {dir}}}",
    "dataset": "data: {{source: local, local_path: {dir}/<the split's .parquet or .jsonl file>}}",
    "held-out set": "eval: {{extra_sets: {{SET: {{source: local, path: {dir}/<the split's .parquet file>}}}}}}",
}
DATASET_KINDS = ("dataset", "held-out set")  # hub datasets, not models: `hf download --repo-type dataset`


class HubUnavailable(RuntimeError):
    """The hub cannot be reached (no network, or HF_HUB_OFFLINE=1) and the files are not cached."""


def offline_hint(repo_id: str, revision: str | None, kind: str = "base model") -> str:
    """One line: what could not be fetched, the command that downloads it, and the fully offline config."""
    revision = revision or "main"
    repo_type = " --repo-type dataset" if kind in DATASET_KINDS else ""
    local = _LOCAL_ALTERNATIVE.get(kind, "{dir}").format(dir="DIR")
    cache = "" if kind in DATASET_KINDS else " (or copy that machine's ~/.cache/huggingface into $HF_HOME here)"
    return (f"cannot fetch {kind} {repo_id}@{revision}: no network (or HF_HUB_OFFLINE=1) and not in the local "
            f"hub cache. On a machine with network run `hf download {repo_id}{repo_type} --revision {revision} "
            f"--local-dir DIR`, copy DIR here and set `{local}` in your config{cache}; or run fully offline with "
            "the default config: `snakemake --cores 1` (config/config.yaml)")


def unreachable_errors() -> tuple[type[BaseException], ...]:
    """What huggingface_hub and datasets raise when the hub is unreachable and nothing is cached."""
    from huggingface_hub.errors import LocalEntryNotFoundError

    return (LocalEntryNotFoundError, ConnectionError)


def download_snapshot(repo_id: str, revision: str | None, target: Path, kind: str = "base model") -> None:
    """Copy ``repo_id`` at ``revision`` into ``target``, through the hub cache (so a filled cache works offline)."""
    from huggingface_hub import snapshot_download

    try:
        snapshot = snapshot_download(repo_id, revision=revision, allow_patterns=ALLOWED_FILES,
                                     ignore_patterns=IGNORED_FILES)
    except unreachable_errors():
        # `from None`: the library's traceback says nothing more than the hint; the error stays on __context__.
        raise HubUnavailable(offline_hint(repo_id, revision, kind)) from None
    copy_allowed(Path(snapshot), target)


def copy_allowed(snapshot: Path, target: Path) -> None:
    """Copy the snapshot's allowed files (real files, not symlinks); offline, snapshot_download returns the cached
    folder whole, so the patterns are applied again here."""
    def matches(name: str, patterns: list[str]) -> bool:
        return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)

    for path in sorted(snapshot.rglob("*")):
        name = path.relative_to(snapshot).as_posix()
        if path.is_file() and matches(name, ALLOWED_FILES) and not matches(name, IGNORED_FILES):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / name)


def fetch_model(source: str, name_or_path: str, revision: str | None, out_dir: str | Path, kind: str) -> None:
    """Place a base model (kind='base model') or adapter (kind='adapter') folder at ``out_dir``."""
    with atomic_directory(out_dir) as tmp:
        if source == "hub":
            download_snapshot(name_or_path, revision, tmp, kind)
        else:
            shutil.copytree(require_model_dir(name_or_path, kind), tmp, dirs_exist_ok=True)
        require_model_dir(tmp, kind)
