"""`make setup` hands uv the package sources pip is configured with (scripts/uv_sources.py): the same index, extra
indexes, find-links folders and constraints, the environment's PIP_* variables over the config files, and pip's
best match across indexes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "uv_sources.py"
spec = importlib.util.spec_from_file_location("uv_sources", SCRIPT)
uv_sources = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uv_sources)

LISTED = """:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.find-links='/opt/wheels'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
global.timeout='60'
"""


def test_pip_config_becomes_uv_flags_with_every_source():
    flags = uv_sources.uv_flags(uv_sources.pip_settings(LISTED, {}))
    assert flags == ["--find-links", "/opt/wheels", "--constraint", "/etc/xdg/pip/constraints.txt",
                     "--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url",
                     "file:///opt/pypi-more/simple", "--index-strategy", "unsafe-best-match"]


def test_the_environment_overrides_the_config_and_no_config_means_pypi():
    settings = uv_sources.pip_settings(LISTED, {"PIP_INDEX_URL": "https://mirror.example/simple",
                                                "PIP_FIND_LINKS": "/a /b"})
    assert settings["index-url"] == ["https://mirror.example/simple"] and settings["find-links"] == ["/a", "/b"]
    assert uv_sources.uv_flags(uv_sources.pip_settings("", {})) == ["--index-strategy", "unsafe-best-match"]
