"""Without network, the hub stages fail at once with one line that says what to download and which config
runs offline; a filled hub cache is used instead of the network. Nothing here ever reaches the network:
HF_HUB_OFFLINE=1 everywhere, and in-process tests also refuse every socket connection."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from workflow import copy_workflow

from thai_grpo.core.hub import HubUnavailable, fetch_model

REPO = Path(__file__).resolve().parents[1]
BASE_REPO, BASE_REVISION = "Qwen/Qwen3-0.6B", "c1899de289a04d12100db370d81485cdf75e47ca"
DATA_REPO = "VISAI-AI/gsm8k-thai"
OFFLINE_CONFIG = "`snakemake --cores 1` (config/config.yaml)"


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """HF_HUB_OFFLINE=1 and an empty HF_HOME, also in the constants huggingface_hub and datasets read at import."""
    import datasets.config
    import huggingface_hub.constants as hub_constants

    home = tmp_path / "hf_home"
    for name in ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"]:
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub_constants, "HF_HOME", str(home))
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", home / "datasets")

    def refuse(*args, **kwargs):
        raise AssertionError("a test tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return home


def assert_one_line_hint(message: str, download: str) -> None:
    assert "\n" not in message
    assert download in message, message
    assert OFFLINE_CONFIG in message, message


def test_fetch_model_offline_fails_fast_with_hint(offline, tmp_path):
    out = tmp_path / "model" / "base"
    start = time.monotonic()
    with pytest.raises(HubUnavailable) as caught:
        fetch_model("hub", BASE_REPO, BASE_REVISION, out, kind="base model")
    assert time.monotonic() - start < 10
    assert_one_line_hint(str(caught.value), f"hf download {BASE_REPO} --revision {BASE_REVISION}")
    assert caught.value.__suppress_context__ and caught.value.__context__ is not None  # kept for debugging
    assert list(out.parent.iterdir()) == []  # neither the output nor a half-written temporary folder


def test_load_hub_dataset_offline_fails_fast_with_hint(offline):
    from thai_grpo.data.problems import DataSource, load_source_dataset

    start = time.monotonic()
    with pytest.raises(HubUnavailable) as caught:
        load_source_dataset(DataSource("hub", path=DATA_REPO, revision="main", split="train"))
    assert time.monotonic() - start < 10
    assert_one_line_hint(str(caught.value), f"hf download {DATA_REPO} --repo-type dataset --revision main")
    assert "data: {source: local, local_path:" in str(caught.value)


def test_second_heldout_set_offline_names_its_own_config_key(offline):
    from thai_grpo.data.problems import extra_set_source, load_source_dataset

    with pytest.raises(HubUnavailable) as caught:
        load_source_dataset(extra_set_source({"path": "juletxara/mgsm", "name": "th"}), kind="held-out set")
    assert_one_line_hint(str(caught.value), "hf download juletxara/mgsm --repo-type dataset --revision main")
    assert "eval: {extra_sets: {SET: {source: local, path:" in str(caught.value)


def test_filled_hub_cache_is_used_offline_safetensors_only(offline, tmp_path, tiny_model_dir):
    """A snapshot already in the hub cache is copied out without network, minus pickles and code."""
    from thai_grpo.models.loading import load_base_model

    snapshot = offline / "hub" / f"models--{BASE_REPO.replace('/', '--')}" / "snapshots" / BASE_REVISION
    shutil.copytree(tiny_model_dir, snapshot)
    (snapshot / "pytorch_model.bin").write_bytes(b"pickle")
    (snapshot / "modeling_remote.py").write_text("raise SystemExit('remote code ran')\n")
    out = tmp_path / "model" / "base"
    fetch_model("hub", BASE_REPO, BASE_REVISION, out, kind="base model")
    names = {path.name for path in out.iterdir()}
    assert "config.json" in names and any(name.endswith(".safetensors") for name in names)
    assert not {"pytorch_model.bin", "modeling_remote.py"} & names
    assert not any(path.is_symlink() for path in out.iterdir())
    load_base_model(out)


@pytest.mark.slow
@pytest.mark.parametrize("target, stage, download", [
    ("results/model/base", "base_model", f"hf download {BASE_REPO} --revision {BASE_REVISION}"),
    ("results/data/source.jsonl", "dataset", f"hf download {DATA_REPO} --repo-type dataset --revision main"),
], ids=["base_model", "dataset"])
def test_real_config_offline_fails_fast_with_hint(tmp_path, target, stage, download):
    workdir = copy_workflow(tmp_path / "workflow")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf_home"), "PYTHONHASHSEED": "0"}
    env.pop("HF_HUB_CACHE", None)
    start = time.monotonic()
    # The target goes before --configfile, which takes every following word as a config file.
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", target,
                           "--configfile", "config/qwen3-0.6b.yaml"],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - start
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    assert elapsed < 60, f"took {elapsed:.0f} s"
    assert download in output and OFFLINE_CONFIG in output, output[-3000:]  # the profile prints the failed log
    log = (workdir / f"results/logs/{stage}.log").read_text().strip().splitlines()
    assert log[-1].startswith("thai_grpo.core.hub.HubUnavailable: cannot fetch"), log[-5:]
    assert not any("site-packages" in line for line in log), "a library traceback reached the log"
    assert not (workdir / target).exists()
