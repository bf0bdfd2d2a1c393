"""What every figure module shares: the Agg backend, a fixed dpi, reproducible PNGs, per-step series."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from cycler import cycler  # noqa: E402

DPI = 110
# Green means higher and red lower everywhere in the report, so the series of models and runs (pass@k curves, bands)
# take matplotlib's tab10 without its green and red.
SERIES_COLOURS = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
plt.rcParams["axes.prop_cycle"] = cycler(color=SERIES_COLOURS)


def save_figure(fig, path) -> None:
    """Write `fig` as PNG (no timestamps in the metadata) and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def step_series(steps: list[dict], *keys: str) -> np.ndarray:
    """Values of a (possibly nested) key per step, NaN where a step lacks it."""
    out = []
    for s in steps:
        value = s
        for k in keys:
            value = value.get(k) if isinstance(value, dict) else None
        out.append(np.nan if value is None else float(value))
    return np.array(out, dtype=float)
