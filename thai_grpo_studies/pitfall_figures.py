"""Figures of the pitfalls report (`snakemake --cores 2 pitfalls`): the pitfall variants' per-step curves overlaid on
the GRPO run's.

- group size: share of groups with std > 0 and accuracy per step for G = 2, 4, 8 (small G: both samples
  agree often and the group teaches nothing);
- temperature: share of groups with std > 0 at temperature 0.3 vs 1.0 (low temperature: diversity collapses);
- reward hacking: mean reward, accuracy and share of empty think blocks with the lenient format regex;
- clipping: the clipped share with one and two passes per batch.
Each legend carries the run's held-out pass@1. Same conventions as ``thai_grpo.report.figures``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.ticker import MaxNLocator

from thai_grpo.report.lessons import PITFALL_FIGURES as FIGURES
from thai_grpo.report.plotting import plt, save_figure, step_series


def run_label(name: str, run: dict, evals: dict, pitfall: str) -> str:
    """'g2: G=2, held-out pass@1 12.5%': the setting the pitfall varies, then the held-out score if any."""
    settings = run.get("settings") or {}
    varied = {"group_size": f"G={settings.get('num_generations')}",
              "temperature": f"T={settings.get('temperature')}",
              "reward_hacking": "lenient format" if "format_lenient" in (settings.get("rewards") or [])
              else "strict format",
              "clipping": f"{settings.get('num_iterations') or 1} pass(es) per batch"}[pitfall]
    estimate = ((evals.get(name) or {}).get("pass@1") or {}).get("estimate")
    score = f", held-out pass@1 {100 * estimate:.1f}%" if estimate is not None else ", not evaluated"
    return f"{name}: {varied}{score}"


def _overlay(ax, runs: dict, names: list[str], key, labels: dict, title: str, ylabel: str, ylim=None) -> None:
    """One line per run of ``key`` (a step key, or a tuple of nested keys) against the step."""
    keys = key if isinstance(key, tuple) else (key,)
    for name in names:
        steps = runs[name].get("steps") or []
        ax.plot(step_series(steps, "step"), step_series(steps, *keys), marker="o", ms=3, label=labels[name])
    ax.set(title=title, xlabel="step", ylabel=ylabel)
    if ylim:
        ax.set_ylim(*ylim)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def plot_group_size(runs: dict, evals: dict, names: list[str], path) -> None:
    """Share of groups with std > 0, and accuracy, per step for each group size G."""
    labels = {n: run_label(n, runs[n], evals, "group_size") for n in names}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    _overlay(axes[0], runs, names, "frac_groups_nonzero_std", labels, "Groups that teach something (std > 0)",
             "fraction", (-0.02, 1.02))
    _overlay(axes[1], runs, names, "accuracy", labels, "Training accuracy per step", "accuracy", (-0.02, 1.02))
    axes[1].legend(fontsize=8, loc="best")
    save_figure(fig, path)


def plot_temperature(runs: dict, evals: dict, names: list[str], path) -> None:
    """Share of groups with std > 0 and the reward spread per step, at each sampling temperature."""
    labels = {n: run_label(n, runs[n], evals, "temperature") for n in names}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    _overlay(axes[0], runs, names, "frac_groups_nonzero_std", labels, "Groups that teach something (std > 0)",
             "fraction", (-0.02, 1.02))
    _overlay(axes[1], runs, names, "reward_std", labels, "Reward spread in the batch", "reward std")
    axes[0].legend(fontsize=8, loc="best")
    save_figure(fig, path)


def plot_reward_hacking(runs: dict, evals: dict, names: list[str], path) -> None:
    """Mean reward, accuracy and share of empty think blocks per step: the lenient run against the strict one."""
    labels = {n: run_label(n, runs[n], evals, "reward_hacking") for n in names}
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), layout="constrained")
    _overlay(axes[0], runs, names, "reward_mean", labels, "Mean reward (what the optimizer sees)", "reward",
             (0, 1.55))
    _overlay(axes[1], runs, names, "accuracy", labels, "Accuracy", "accuracy", (-0.02, 1.02))
    _overlay(axes[2], runs, names, "empty_think_share", labels, "Empty think blocks <think></think>",
             "share of completions", (-0.02, 1.02))
    axes[0].legend(fontsize=8, loc="best")
    save_figure(fig, path)


def plot_clipping(runs: dict, evals: dict, names: list[str], path) -> None:
    """Share of tokens whose ratio pi/pi_old was clipped per step: 0 on-policy, > 0 when a batch is reused."""
    labels = {n: run_label(n, runs[n], evals, "clipping") for n in names}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    _overlay(axes[0], runs, names, "clip_ratio", labels, "Tokens clipped (ratio outside 1 +/- epsilon)", "share")
    _overlay(axes[1], runs, names, "kl", labels, "KL to each run's reference (grpo.reference)", "KL per token")
    axes[0].legend(fontsize=8, loc="best")
    save_figure(fig, path)


PLOTS = {"group_size": plot_group_size, "temperature": plot_temperature, "reward_hacking": plot_reward_hacking,
         "clipping": plot_clipping}


def draw_pitfalls(results: dict, out_dir: str | Path) -> dict[str, Path]:
    """One PNG per pitfall that ``results['pitfalls']`` lists runs for (and whose runs have steps)."""
    runs, evals = results.get("runs") or {}, results.get("eval") or {}
    paths = {}
    for pitfall, names in (results.get("pitfalls") or {}).items():
        names = [n for n in names if (runs.get(n) or {}).get("steps")]
        if pitfall in PLOTS and len(names) > 1:
            paths[FIGURES[pitfall]] = Path(out_dir) / f"{FIGURES[pitfall]}.png"
            PLOTS[pitfall](runs, evals, names, paths[FIGURES[pitfall]])
    return paths
