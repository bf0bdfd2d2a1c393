"""The wall seconds of a run's jobs from Snakemake's benchmark files (``make docs-reference`` times the run from
them)."""

from __future__ import annotations

import csv
from pathlib import Path


def read_benchmarks(benchmark_dir: str | Path) -> dict[str, float]:
    """{job name: wall seconds} from Snakemake's benchmark TSVs (``s`` column, first row)."""
    out = {}
    for path in sorted(Path(benchmark_dir).glob("*.tsv")):
        with open(path, encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        if rows:
            out[path.stem] = float(rows[0]["s"])
    return out
