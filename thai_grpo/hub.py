"""Fetching the real run's base model and SFT adapter: pinned revisions, safetensors only, no remote code.

Without network and without the files in the local hub cache, this fails at once with a message that
says what to download and which offline config to use, instead of a stack trace from inside a library.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from thai_grpo.io import atomic_directory
from thai_grpo.models import require_model_dir

# Weights only as safetensors; pickled *.bin / *.pt are never fetched.
ALLOWED_FILES = ["*.json", "*.safetensors", "*.txt", "*.jinja", "*.model", "tokenizer*"]


class HubUnavailable(RuntimeError):
    """The hub cannot be reached and the files are not cached."""


def offline_hint(repo_id: str, revision: str | None) -> str:
    return (f"cannot fetch {repo_id}@{revision or 'main'}: no network and not in the local hub cache. "
            f"On a machine with network run `hf download {repo_id} --revision {revision or 'main'}` "
            "(and copy ~/.cache/huggingface here), or run offline with the default config: "
            "`snakemake --cores 1` (config/config.yaml)")


def download_snapshot(repo_id: str, revision: str | None, target: Path) -> None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        snapshot_download(repo_id, revision=revision, local_dir=str(target), allow_patterns=ALLOWED_FILES)
    except LocalEntryNotFoundError as error:
        raise HubUnavailable(offline_hint(repo_id, revision)) from error
    except OSError as error:  # connection refused / DNS failure surface as OSError subclasses
        raise HubUnavailable(offline_hint(repo_id, revision)) from error


def fetch_model(source: str, name_or_path: str, revision: str | None, out_dir: str | Path, kind: str) -> None:
    """Place a base model (kind='base model') or adapter (kind='adapter') folder at ``out_dir``."""
    with atomic_directory(out_dir) as tmp:
        if source == "hub":
            download_snapshot(name_or_path, revision, tmp)
        else:
            shutil.copytree(require_model_dir(name_or_path, kind), tmp, dirs_exist_ok=True)
        require_model_dir(tmp, kind)
