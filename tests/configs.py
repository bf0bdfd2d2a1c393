"""The shipped configs as Snakemake hands them to the pipeline: config/config.yaml with the named files merged on top,
validated against config/schema.yaml, its defaults filled in."""

from __future__ import annotations

from pathlib import Path

from thai_grpo.workflow import load_config_files

REPO = Path(__file__).resolve().parents[1]


def config_of(*names: str) -> dict:
    """``config/config.yaml`` then ``config/<name>`` for each of ``names``, merged and validated."""
    return load_config_files([str(REPO / "config" / name) for name in ("config.yaml", *names)],
                             str(REPO / "config" / "schema.yaml"))
