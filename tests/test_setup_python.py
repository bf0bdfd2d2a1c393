"""`make setup` on a Python older than the lock needs (pyproject.toml's requires-python): one line and a non-zero exit
before any venv is made; a new enough one goes on to make the venv. Fake Pythons that answer only the version."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def fake_python(folder: Path, version: str) -> Path:
    """A ``python`` that reports ``version``, logs every call, and fails anything else (making a venv)."""
    folder.mkdir(parents=True, exist_ok=True)
    python = folder / "python"
    python.write_text(f'#!/bin/sh\necho "$*" >> "{folder}/calls"\n'
                      f'case "$*" in *version_info*) echo {version};; *) exit 7;; esac\n', encoding="utf-8")
    python.chmod(0o755)
    return python


def make_setup(tmp_path: Path, version: str) -> subprocess.CompletedProcess:
    python = fake_python(tmp_path / "bin", version)
    return subprocess.run(["make", "setup", f"PYTHON={python}", f"VENV={tmp_path / 'venv'}"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_requires_python_is_the_setup_check():
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    required = re.search(r'requires-python = ">=([0-9.]+)"', pyproject).group(1)
    assert required == "3.11" and f"MIN_PYTHON := {required}\n" in makefile


@pytest.mark.parametrize("version", ["3.10", "2.7"])
def test_an_older_python_stops_setup_with_one_line(tmp_path, version):
    done = make_setup(tmp_path, version)
    assert done.returncode != 0
    ours = [line for line in done.stderr.splitlines() if line.startswith("make setup:")]
    assert ours == [f"make setup: {tmp_path}/bin/python is Python {version}; the pinned lock needs Python >= 3.11: "
                    "install one and run `make setup PYTHON=python3.11` (or newer)"], done.stderr
    assert "-m venv" not in (tmp_path / "bin/calls").read_text() and not (tmp_path / "venv").exists()


@pytest.mark.parametrize("version", ["3.11", "3.13"])
def test_a_new_enough_python_goes_on_to_make_the_venv(tmp_path, version):
    done = make_setup(tmp_path, version)
    assert "make setup:" not in done.stderr
    assert f"-m venv {tmp_path / 'venv'}" in (tmp_path / "bin/calls").read_text()  # the fake then fails it
