"""The gains figure: a forest plot of each model's held-out pass@1 minus SFT's, its paired 95% interval and verdict."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.transforms import blended_transform_factory

VERDICT_COLOURS = {"higher": "#2b8a3e", "lower": "#c92a2a", "equivalent": "#1971c2", "not_resolved": "#495057",
                   "not_tested": "#868e96", None: "#adb5bd"}
ROW_HEIGHT, FRAME_HEIGHT, WIDTH = 0.46, 1.15, 8.6  # inches
FONT = 10
VERDICT_X = 0.6  # the verdict column, in the text panel's width


def gains_figure(rows: list[dict], reference: str = "SFT", metric: str = "held-out pass@1",
                 margin: float | None = None):
    """The forest plot of ``rows`` as a matplotlib figure (not saved): the intervals, then the text columns."""
    n = max(len(rows), 1)
    fig, (ax, side) = plt.subplots(1, 2, figsize=(WIDTH, FRAME_HEIGHT + ROW_HEIGHT * n), sharey=True,
                                   layout="constrained", gridspec_kw={"width_ratios": [1.3, 1]})
    ys = list(range(len(rows)))
    if margin:
        ax.axvspan(-100 * margin, 100 * margin, color="#e9ecef", lw=0)
    ax.axvline(0, color="black", lw=1)
    for y, row in zip(ys, rows):
        if row["mean_diff"] is None:
            continue
        colour = VERDICT_COLOURS.get(row["verdict"], VERDICT_COLOURS[None])
        low, high = 100 * row["ci_low"], 100 * row["ci_high"]
        ax.barh(y, high - low, left=low, height=0.38, color=colour, alpha=0.45, edgecolor=colour)
        ax.plot([100 * row["mean_diff"]], [y], "o", color=colour, ms=7, zorder=3)
    ax.set_yticks(ys, [row["name"] for row in rows], fontsize=FONT)
    ax.set_ylim(len(rows) - 0.5, -0.5 - 0.6)  # first row on top; room above it for the column heads
    ax.set_xlim(*_limits(rows, margin))
    shaded = f"; shaded: equivalence margin ±{100 * margin:g}" if margin else ""
    ax.set_xlabel(f"{metric} minus {reference}'s, points\n(bar: paired 95% interval over problems{shaded})",
                  fontsize=FONT - 1)
    ax.grid(alpha=0.3, axis="x")
    ax.tick_params(axis="x", labelsize=FONT - 1)
    _text_columns(side, rows)
    return fig


def _limits(rows: list[dict], margin: float | None) -> tuple[float, float]:
    """x limits in points holding every interval, zero and the margin, padded by 8% of the span."""
    values = [0.0] + ([-100 * margin, 100 * margin] if margin else [])
    values += [100 * r[key] for r in rows if r["mean_diff"] is not None for key in ("ci_low", "ci_high")]
    low, high = min(values), max(values)
    pad = 0.08 * max(high - low, 1.0)
    return low - pad, high + pad


def _text_columns(side, rows: list[dict]) -> None:
    """Beside each row: its difference [interval] in points, the verdict word (coloured) and the verdict's family."""
    side.axis("off")
    at = blended_transform_factory(side.transAxes, side.transData)
    for x, head in ((0.0, "difference [95%], points"), (VERDICT_X, "result")):
        side.text(x, -1.0, head, transform=at, fontsize=FONT - 1, color="#6c757d", va="center")
    for y, row in enumerate(rows):
        colour = VERDICT_COLOURS.get(row["verdict"], VERDICT_COLOURS[None])
        side.text(0.0, y, (row.get("interval_text") or "").replace("-", "\u2212"), transform=at, fontsize=FONT,
                  va="center")
        family = row.get("family_short")
        side.text(VERDICT_X, y - (0.14 if family else 0), row["word"], transform=at, fontsize=FONT, va="center",
                  color=colour, weight="bold" if row["supported"] else "normal")
        if family:
            side.text(VERDICT_X, y + 0.24, family, transform=at, fontsize=FONT - 2, va="center", color="#6c757d")
