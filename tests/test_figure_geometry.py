"""Every figure of the report reads at 1280 px: checked from matplotlib's own geometry, not by eye. Each figure is
caught as it is saved (``save_figure``), drawn once, and then every visible text's window extent is measured: no text
may overlap another text or a legend, leave the figure, or (a label placed on the data) leave its axes; no legend and
no label may sit on a plotted point. The figures are the report's own (``draw_all``) on the smoke run, the offline
default's document and one shaped like the default run, and the pitfalls report's (``draw_pitfalls``)."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from matplotlib.legend import Legend
from matplotlib.text import Text
from report_documents import offline_document

from thai_grpo.report import figures

ROOT = Path(__file__).resolve().parent.parent
SMOKE_RUN = ROOT / "tests" / "fixtures" / "results_smoke_run.json"
SLACK = 1.0  # px: an extent may pass its box by a pixel
GAP = 2.0  # px: two texts closer than this read as one ("A=-0.35A=-0.35")


def _drawn_texts(fig) -> list[Text]:
    """The texts a draw of ``fig`` renders (a tick label outside the view limits exists but is not drawn)."""
    drawn, draw = [], Text.draw

    def record(text, renderer):
        drawn.append(text)
        return draw(text, renderer)

    Text.draw = record
    try:
        fig.canvas.draw()
    finally:
        Text.draw = draw
    return drawn


def _texts(fig, renderer) -> list[tuple[Text, object]]:
    """Every drawn, non-empty text of ``fig`` that is not inside a legend, with its window extent."""
    inside_legends = {id(t) for legend in fig.findobj(Legend) for t in legend.findobj(Text)}
    return [(t, t.get_window_extent(renderer)) for t in dict.fromkeys(_drawn_texts(fig))
            if t.get_visible() and t.get_text().strip() and id(t) not in inside_legends]


def _overlap(a, b) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > -GAP) and (min(a.y1, b.y1) - max(a.y0, b.y0) > -GAP)


def _inside(inner, outer) -> bool:
    return (inner.x0 >= outer.x0 - SLACK and inner.x1 <= outer.x1 + SLACK and inner.y0 >= outer.y0 - SLACK
            and inner.y1 <= outer.y1 + SLACK)


def _points(ax) -> np.ndarray:
    """The plotted points of ``ax`` in pixels: every line's vertices (markers included) and every scatter's offsets."""
    points = [line.get_transform().transform(line.get_xydata()) for line in ax.lines if line.get_visible()
              and len(line.get_xydata()) > 2]
    points += [c.get_offset_transform().transform(c.get_offsets()) for c in ax.collections
               if c.get_visible() and len(c.get_offsets()) and type(c).__name__ == "PathCollection"]
    stacked = np.concatenate(points) if points else np.empty((0, 2))
    return stacked[np.isfinite(stacked).all(axis=1)]


def _covered(points: np.ndarray, box) -> int:
    return int(((points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0)
                & (points[:, 1] < box.y1)).sum())


def problems(fig, name: str) -> list[str]:
    """What in ``fig`` does not read: overlapping texts, texts outside the figure or off their axes, legends on data."""
    renderer = fig.canvas.get_renderer()
    texts, found = _texts(fig, renderer), []
    boxes = texts + [(legend, legend.get_window_extent(renderer)) for legend in fig.findobj(Legend)
                     if legend.get_visible()]
    label = lambda artist: repr(artist.get_text()) if isinstance(artist, Text) else "the legend"  # noqa: E731
    for (a, box_a), (b, box_b) in combinations(boxes, 2):
        if _overlap(box_a, box_b):
            found.append(f"{name}: {label(a)} overlaps {label(b)}")
    for text, box in texts:
        if not _inside(box, fig.bbox):
            found.append(f"{name}: {label(text)} leaves the figure")
    for ax in fig.axes:
        for text in ax.texts if ax.axison else ():  # labels placed on the data (ax.text, ax.annotate): inside the axes
            if not (text.get_visible() and text.get_text().strip()):
                continue
            box = text.get_window_extent(renderer)
            if not _inside(box, ax.bbox):
                found.append(f"{name}: {label(text)} leaves its axes")
            if _covered(_points(ax), box):
                found.append(f"{name}: {label(text)} covers {_covered(_points(ax), box)} plotted points")
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            box, points = legend.get_window_extent(renderer), [_points(a) for a in fig.axes
                                                               if a.bbox.overlaps(ax.bbox)]
            points = np.concatenate(points) if points else np.empty((0, 2))
            covered = _covered(points, box)
            if covered:
                found.append(f"{name}: the legend of {ax.get_title()!r} covers {covered} plotted points")
    return found


@pytest.fixture()
def caught(monkeypatch):
    """{figure name: its problems}, for every figure saved while the fixture is active."""
    found: dict[str, list[str]] = {}

    def check_then_save(fig, path, save=figures.save_figure):
        found[Path(path).stem] = problems(fig, Path(path).stem)
        save(fig, path)

    monkeypatch.setattr(figures, "save_figure", check_then_save)  # draw_all saves the gains figure too
    try:
        from thai_grpo_studies import pitfall_figures
        monkeypatch.setattr(pitfall_figures, "save_figure", check_then_save)
    except ImportError:  # pragma: no cover - the studies ship with the package
        pass
    return found


def _smoke() -> dict:
    return json.loads(SMOKE_RUN.read_text(encoding="utf-8"))


def _default_shaped() -> dict:
    """The offline default's document with groups and steps shaped like its run: G = 8 with one right answer among
    seven wrong (the near-unanimous group: the tallest bar and eight labels side by side), an all-equal group, and 40
    steps whose mean reward sits where the legend was."""
    results = offline_document()
    rng = np.random.default_rng(0)
    mixed = [0.5, 0.5, 0.5, 1.5, 0.5, 0.5, 0.5, 0.5]
    std = float(np.std(mixed, ddof=1))
    results["train"]["example_groups"] = {
        "mixed": {"step": 1, "rewards": mixed, "advantages": [(r - np.mean(mixed)) / (std + 1e-4) for r in mixed]},
        "all_equal": {"step": 3, "rewards": [0.5] * 8, "advantages": [0.0] * 8}}
    template = results["train"]["steps"][-1]
    steps = []
    for step in range(1, 41):
        correct = float(np.clip(0.35 + 0.3 * step / 40 + rng.normal(0, 0.08), 0, 1))
        steps.append({**template, "step": step, "reward_mean": 0.5 + correct, "accuracy": correct,
                      "rewards": {"correct": correct, "format": 0.3, "thai": 0.2},
                      "frac_groups_nonzero_std": float(rng.choice([0.75, 0.875, 1.0])),
                      "frac_reward_zero_std_trl": float(rng.choice([0.0, 0.125, 0.25])),
                      "completion_length_mean": float(40 + rng.normal(0, 2)), "kl": 0.003 * step,
                      "clipped_ratio": 0.0, "generated_tokens": 2600})
    results["train"]["steps"] = steps
    return results


DOCUMENTS = {"smoke": _smoke, "offline": offline_document, "default-shaped": _default_shaped}


@pytest.mark.parametrize("document", list(DOCUMENTS))
def test_no_text_of_a_report_figure_overlaps_another_or_leaves_its_axes(document, caught, tmp_path):
    results = DOCUMENTS[document]()
    drawn = figures.draw_all(results, tmp_path)
    assert {"group_advantages", "training_curves", "grpo_vs_ppo", "k1_vs_k3_synthetic"} <= set(caught), set(drawn)
    if document == "smoke":
        assert "k1_vs_k3_real" in caught
    bad = [problem for found in caught.values() for problem in found]
    assert not bad, "\n".join(bad)


def test_no_text_of_a_pitfall_figure_overlaps_another_or_leaves_its_axes(caught, tmp_path):
    from test_report import with_pitfalls

    from thai_grpo_studies.pitfall_figures import draw_pitfalls

    draw_pitfalls(with_pitfalls(_smoke()), tmp_path)
    assert any(name.startswith("pitfall_") for name in caught), set(caught)
    bad = [problem for found in caught.values() for problem in found]
    assert not bad, "\n".join(bad)


def test_the_check_sees_overlapping_labels_and_a_legend_on_the_data():
    """The checker itself: two labels on one spot, a label off its axes and a legend over a line's points fail it."""
    from thai_grpo.report.plotting import plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(np.linspace(0, 1, 50), np.linspace(0.85, 0.95, 50), label="a line along the top")
    ax.set(xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="upper center")
    ax.text(0.4, 0.5, "A=-0.35")
    ax.text(0.42, 0.5, "A=-0.35")
    ax.text(0.7, 0.1, "runs off its axes")
    found = problems(fig, "probe")
    plt.close(fig)
    assert any("overlaps" in p and "A=-0.35" in p for p in found), found
    assert any("leaves its axes" in p for p in found), found
    assert any("covers" in p for p in found), found
