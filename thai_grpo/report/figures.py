"""The report's figures: each plot function writes one PNG from plain data, seeded: same inputs, same file."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyBboxPatch
from matplotlib.ticker import FormatStrFormatter, MaxNLocator
from matplotlib.transforms import blended_transform_factory

from thai_grpo.analyses import kl
from thai_grpo.report import glance, lessons, run_words
from thai_grpo.report.figures_gains import gains_figure
from thai_grpo.report.plotting import save_figure, step_series
from thai_grpo.report.verdicts import kl_takeaway

REWARD_COLOURS = {"correct": "#2b8a3e", "format": "#1971c2", "thai": "#e8590c"}
POSITIVE, NEGATIVE, NEUTRAL = "#2b8a3e", "#c92a2a", "#868e96"


def solve_rate_transitions(before, after) -> dict[str, int]:
    """Problems by how their correct count c_i moved from ``before`` to ``after`` (``no_signal_ever``: 0 in both)."""
    b, a = np.asarray(before, dtype=int), np.asarray(after, dtype=int)
    return {
        "moved_up": int((a > b).sum()),
        "newly_solved": int(((a > 0) & (b == 0)).sum()),
        "lost": int(((b > 0) & (a == 0)).sum()),  # solved at least once before, never after
        "got_worse": int((a < b).sum()),
        "no_signal_ever": int(((a == 0) & (b == 0)).sum()),
        "unchanged": int(((a == b) & (a > 0)).sum()),
        "total": int(b.size),
    }


def plot_training_curves(steps: list[dict], path) -> None:
    """Six panels per optimizer step; length with accuracy is DeepSeek-R1's figure in miniature."""
    x = step_series(steps, "step")
    fig, axes = plt.subplots(3, 2, figsize=(10, 5.0), layout="constrained")
    ax = axes[0, 0]
    ax.plot(x, step_series(steps, "reward_mean"), color="black", lw=2, label="mean reward (sum)")
    for name, colour in REWARD_COLOURS.items():
        ax.plot(x, step_series(steps, "rewards", name), color=colour, marker=".", label=name)
    ax.set(title="Mean reward and its parts", ylabel="reward", ylim=(0, 2.1))  # headroom: the legend above the data
    ax.legend(fontsize=7.5, loc="upper left", ncol=4, columnspacing=0.8, handlelength=1.5)
    ax = axes[0, 1]
    ax.plot(x, step_series(steps, "frac_groups_nonzero_std"), marker="o", ms=5, mfc="white", lw=2.5, alpha=0.6,
            label="groups with std > 0")
    ax.plot(x, 1 - step_series(steps, "frac_reward_zero_std_trl"), ls="--", color="black", lw=1, zorder=3,
            label="TRL: 1 - frac_reward_zero_std")  # on top: where the two agree, the dashes run through the markers
    ax.set(title="Groups that teach something", ylabel="fraction", ylim=(-0.02, 1.02))
    ax.legend(fontsize=8, loc="lower left")
    ax = axes[1, 0]
    ax.plot(x, step_series(steps, "completion_length_mean"), color="#5f3dc4", marker=".")
    ax.set(title="Completion length with accuracy", ylabel="mean tokens")
    ax.yaxis.label.set_color("#5f3dc4")
    twin = ax.twinx()
    twin.plot(x, step_series(steps, "accuracy"), color=REWARD_COLOURS["correct"], marker="s", ms=3)
    twin.set_ylabel("accuracy", color=REWARD_COLOURS["correct"])
    twin.set_ylim(0, 1)
    axes[1, 1].plot(x, step_series(steps, "kl"), color="#0c8599", marker=".")
    axes[1, 1].set(title="KL(policy || reference), k3 estimate", ylabel="nats / token")
    axes[2, 0].plot(x, step_series(steps, "clipped_ratio"), color=NEGATIVE, marker=".")
    axes[2, 0].set(title="Truncated: completions cut at the length budget", ylabel="fraction", ylim=(-0.02, 1.02))
    axes[2, 1].bar(x, step_series(steps, "generated_tokens"), color=NEUTRAL)
    axes[2, 1].set(title="Generated tokens per step", ylabel="tokens")
    for ax in axes.flat:
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    save_figure(fig, path)


PPO_COLOURS = {"grpo": "#868e96", "ppo": "#5f3dc4", "ppo_verifier": "#e8590c"}
# Per panel: the step key, the key a run must record for the panel to show it (None: every run), title, y label.
PPO_PANELS = (("reward_mean", None, "Code reward (sum), every run", "reward"),
              ("score_mean", "score_mean", "Score PPO maximised (after the EOS penalty)", "score"),
              ("kl", None, "KL to {kl_name} (PPO: k1, GRPO: k3)", "nats / token"),
              ("clip_ratio", None, "Clip fraction (ratio outside 1 +- 0.2)", "fraction of tokens"),
              ("value_loss", "value_loss", "Value loss (clipped, x 0.5)", "loss"),
              ("explained_variance", "value_loss", "Explained variance of the value model", "1 - Var(R - V) / Var(R)"))


def plot_ppo_curves(runs: dict[str, list[dict]], path, kl_name: str = "the SFT policy") -> None:
    """PPO's run health beside GRPO's (``runs``: {name: steps}), six panels."""
    fig, axes = plt.subplots(3, 2, figsize=(10, 9), layout="constrained")
    for ax, (key, needs, title, ylabel) in zip(axes.flat, PPO_PANELS):
        for name, steps in runs.items():
            if needs is None or needs in steps[0]:
                ax.plot(step_series(steps, "step"), step_series(steps, key), color=PPO_COLOURS.get(name, "black"),
                        marker=".", label=name)
        ax.set(title=title.format(kl_name=kl_name), ylabel=ylabel)
    for ax in axes.flat:
        ax.yaxis.set_major_formatter(FormatStrFormatter("%.3g"))  # no "1e-5" multiplier over the panel's title
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    save_figure(fig, path)


def plot_ppo_score_vs_reward(steps: list[dict], path) -> None:
    """Section 7's evidence for PPO: per step, the reward model's score it maximised beside the code reward."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 2.1), layout="constrained")
    x = step_series(steps, "step")
    for ax, key, title in ((axes[0], "score_mean", "What PPO maximised: its reward model's score"),
                           (axes[1], "reward_mean", "What the verifier pays: the code reward")):
        ax.plot(x, step_series(steps, key), color="black", marker=".")
        ax.set(title=title, xlabel="PPO step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    save_figure(fig, path)


def _advantage_panel(ax, group: dict | None, title: str) -> None:
    """Bars of one group's advantages coloured by sign, each annotated with its reward."""
    if group:
        step = f" (step {group['step']})" if group.get("step") is not None else ""
        title += f"{step}, mean reward {np.mean(group['rewards']):.2f} (the line A = 0)"
    ax.set_title(title, fontsize=10)
    if not group:
        ax.text(0.5, 0.5, "not recorded", ha="center", va="center", transform=ax.transAxes)
        return
    adv = np.asarray(group["advantages"], dtype=float)
    idx = np.arange(1, len(adv) + 1)
    colours = [POSITIVE if a > 1e-9 else NEGATIVE if a < -1e-9 else NEUTRAL for a in adv]
    ax.bar(idx, adv, color=colours)
    ax.axhline(0, color="black", lw=0.8)
    for i, a in zip(idx, adv):  # the advantage on its bar, the reward under the axis: one short label per bar
        ax.annotate(f"{a:+.2f}" if abs(a) >= 0.005 else "0", (i, a), xytext=(0, 2 if a >= 0 else -2),
                    textcoords="offset points", ha="center", va="bottom" if a >= 0 else "top", fontsize=8.5)
    ax.set_xticks(idx, [f"{i}\nr={_short(r)}" for i, r in zip(idx, group["rewards"])], fontsize=8.5)
    ax.set(xlabel="completion in the group and its reward r", ylabel="advantage A_i")


def _short(value: float) -> str:
    """1.5 -> '1.5', 0.30 -> '0.3', 0.175 -> '0.17': rewards as short labels."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def plot_group_advantages(example_groups: dict, path) -> None:
    """Figure 5.1: a group with mixed rewards (learning signal) beside an all-equal group (all zero)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.0), sharey=True, layout="constrained")
    mixed, equal = example_groups.get("mixed"), example_groups.get("all_equal")
    _advantage_panel(axes[0], mixed, "Mixed group")
    _advantage_panel(axes[1], equal, "All-equal group")
    if equal:
        axes[1].text(0.5, 0.7, "all advantages 0:\nthis group teaches nothing", ha="center",
                     transform=axes[1].transAxes, color=NEUTRAL)
    ymax = max([1.0] + [abs(a) for g in (mixed, equal) if g for a in g["advantages"]]) * 1.45
    axes[0].set_ylim(-ymax, ymax)
    save_figure(fig, path)


def _box(ax, x, y, text, colour, crossed=False, w=0.38, h=0.13) -> None:
    """A rounded box with centred text; `crossed` strikes it out (a model GRPO does not need)."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.01", fc=colour,
                                ec="black", alpha=0.35 if crossed else 0.9, lw=1))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=8.5, zorder=3,
            bbox=dict(fc="white", ec="none", alpha=0.85) if crossed else None)
    if crossed:
        ax.plot([x, x + w], [y, y + h], color=NEGATIVE, lw=1.5, alpha=0.7)
        ax.plot([x, x + w], [y + h, y], color=NEGATIVE, lw=1.5, alpha=0.7)


def plot_grpo_vs_ppo(path) -> None:
    """Figure 5.2: the four models PPO keeps in memory beside GRPO's two, which share one frozen base with LoRA."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.1), layout="constrained")
    trained, frozen, code = "#b2f2bb", "#d0ebff", "#fff3bf"
    ppo = [("Policy (trained)", trained), ("Reference (frozen)", frozen),
           ("Reward model (frozen,\nfrom preference pairs)", frozen), ("Value model / critic\n(trained, GAE)", trained)]
    for i, (text, colour) in enumerate(ppo):
        _box(axes[0], 0.06 + 0.5 * (i % 2), 0.6 - 0.3 * (i // 2), text, colour)
    axes[0].set_title("PPO: 4 models in memory")
    axes[0].text(0.5, 0.08, "advantage from the critic's value estimates", ha="center", fontsize=9)
    ax = axes[1]
    _box(ax, 0.06, 0.6, "Policy = base + LoRA\nadapter (trained)", trained)
    _box(ax, 0.56, 0.6, "Reference = same base,\nadapter off / frozen", frozen)
    _box(ax, 0.06, 0.3, "Reward model: not needed", frozen, crossed=True)
    _box(ax, 0.56, 0.3, "Value model: not needed", trained, crossed=True)
    _box(ax, 0.2, 0.05, "Verifier: code, `answer == gold`", code, w=0.6, h=0.1)
    ax.add_patch(FancyBboxPatch((0.03, 0.56), 0.94, 0.27, boxstyle="round,pad=0.01", fc="none",
                                ec="grey", ls="--", lw=1))
    ax.text(0.5, 0.78, "one base model in memory, shared by both (LoRA)", ha="center", fontsize=8.5, color="dimgrey")
    ax.set_title("GRPO: policy + reference only (2 models)")
    ax.text(0.5, 0.2, "advantage = group-relative reward", ha="center", fontsize=9)
    for ax in axes:
        ax.set(xlim=(0, 1), ylim=(0, 0.9))
        ax.axis("off")
    save_figure(fig, path)


SYNTHETIC_P = np.array([0.30, 0.22, 0.15, 0.11, 0.08, 0.06, 0.04, 0.02, 0.01, 0.01])
SYNTHETIC_Q = np.array([0.22, 0.20, 0.16, 0.12, 0.10, 0.07, 0.05, 0.04, 0.02, 0.02])


def _k_band(ax, runs: np.ndarray, x: np.ndarray, colour: str, label: str) -> None:
    """Draw the first run as a line and the 10-90 percentile band over all runs."""
    lo, hi = np.percentile(runs, [10, 90], axis=0)
    ax.fill_between(x, lo, hi, color=colour, alpha=0.2, lw=0)
    ax.plot(x, runs[0], color=colour, lw=1.5, label=label)


def plot_k1_vs_k3_synthetic(path, seed: int = 0, n: int = 4096, n_seeds: int = 30) -> None:
    """Figure 5.3 (synthetic): running means of k1 and k3 against KL(p || q), 10-90 percentile bands over seeds."""
    p, q = SYNTHETIC_P / SYNTHETIC_P.sum(), SYNTHETIC_Q / SYNTHETIC_Q.sum()
    runs = [kl.sample_kl_estimates(p, q, n, np.random.default_rng(seed + i)) for i in range(n_seeds)]
    true_kl = float(runs[0]["true_kl"])
    running = {name: np.array([kl.running_mean(r[name]) for r in runs]) for name in ("k1", "k3")}
    negative = {name: float(np.mean([np.mean(np.asarray(r[name]) < 0) for r in runs])) for name in ("k1", "k3")}
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.9), layout="constrained",
                             gridspec_kw={"width_ratios": [1, 2]})
    cats = np.arange(len(p))
    axes[0].bar(cats - 0.2, p, 0.4, label="p (policy)", color="#5f3dc4")
    axes[0].bar(cats + 0.2, q, 0.4, label="q (reference)", color=NEUTRAL)
    axes[0].set(title=f"Two categorical distributions\nKL(p || q) = {true_kl:.4f}", xlabel="token")
    axes[0].legend(fontsize=8)
    _running_panel(axes[1], running["k1"], running["k3"], true_kl, "samples drawn from p", legend="upper right")
    axes[1].set_title(f"Running means; single samples below 0: k1 {negative['k1']:.0%}, k3 {negative['k3']:.0%}")
    for edge in (10, 500):
        axes[1].axvline(edge, color="grey", ls=":", lw=1)
    axes[1].text(12, 0.97, "batch sizes of tens to hundreds", transform=axes[1].get_xaxis_transform(),
                 ha="left", va="top", fontsize=8, color="dimgrey")
    save_figure(fig, path)


def _running_panel(ax, k1_runs, k3_runs, reference: float, xlabel: str, ref_label="true KL", legend="best") -> None:
    """Running-mean bands of k1 and k3 on a log x-axis, with a horizontal reference line."""
    x = np.arange(1, k1_runs.shape[1] + 1)
    _k_band(ax, k1_runs, x, "#e8590c", "k1 = log(p/q)")
    _k_band(ax, k3_runs, x, "#1971c2", "k3 = (x - 1) - log x,  x = q/p")
    ax.axhline(reference, color="black", ls="--", lw=1, label=ref_label)
    start = 9 if x.size > 10 else 0
    bands = np.percentile(np.concatenate([k1_runs, k3_runs])[:, start:], [10, 90], axis=0)
    lo, hi = min(bands[0].min(), reference), max(bands[1].max(), reference)
    pad = 0.1 * max(hi - lo, 1e-4)
    ax.set(xscale="log", xlabel=xlabel, ylabel="running mean estimate", ylim=(lo - pad, hi + pad))
    ax.legend(fontsize=8, loc=legend)
    ax.grid(alpha=0.3)


K1_COLOUR, K3_COLOUR = "#e8590c", "#1971c2"


def plot_k1_vs_k3_real(kl_real: dict, path, seed: int = 0, n_orders: int = 20) -> None:
    """Figure 5.3 (real) on the run's tokens: running means of k1, k3 and the exact KL (more panels with a summary)."""
    logp, logq = np.asarray(kl_real["logp_policy"], float), np.asarray(kl_real["logp_ref"], float)
    columns = {"k1": kl.k1(logp, logq), "k3": kl.k3(logp, logq)}
    summary = kl_real.get("summary")
    if summary:
        columns["exact"] = np.asarray(kl_real["kl_exact"], float)
    rng = np.random.default_rng(seed)
    orders = [np.arange(logp.size)] + [rng.permutation(logp.size) for _ in range(n_orders - 1)]
    runs = {name: np.array([kl.running_mean(values[o]) for o in orders]) for name, values in columns.items()}
    reference = float(columns["exact"].mean()) if summary else float(columns["k3"].mean())
    if summary:  # (a) across the top, (b) and (c) beside each other under it: each panel readable at page width
        panels = plt.figure(figsize=(10, 4.5), layout="constrained").subplot_mosaic([["a", "a"], ["b", "c"]])
        fig, ax = panels["a"].figure, panels["a"]
    else:
        fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    _running_panel(ax, runs["k1"], runs["k3"], reference, "held-out tokens (random orders)",
                   ref_label="exact KL, mean over all tokens" if summary else "mean k3 over all tokens")
    if summary:
        _k_band(ax, runs["exact"], np.arange(1, logp.size + 1), "black", "exact KL at each position")
        ax.legend(fontsize=7, loc="best")
        _estimator_means_panel(panels["b"], summary)
        _regimes_panel(panels["c"], summary["regimes"])
    ax.set_title(f"(a) {logp.size} sampled tokens: k1 below 0 for {np.mean(columns['k1'] < 0):.0%}", fontsize=10)
    save_figure(fig, path)


def _estimator_means_panel(ax, summary: dict) -> None:
    """Means of the exact KL, k1 and k3: bootstrap intervals over problems (thick), +- 1.96 exact SE (thin)."""
    means, exact_se = summary["means"], summary["exact_se"]
    for x, (name, colour) in enumerate((("exact", "black"), ("k1", K1_COLOUR), ("k3", K3_COLOUR))):
        m = means[name]
        ax.errorbar([x - 0.08], [m["mean"]], yerr=[[m["mean"] - m["low"]], [m["high"] - m["mean"]]], fmt="o",
                    color=colour, lw=3, capsize=4,
                    label="bootstrap over problems (which were drawn)" if x == 0 else None)
        if name in exact_se:
            half = 1.96 * exact_se[name]
            ax.errorbar([x + 0.08], [m["mean"]], yerr=[[half], [half]], fmt="s", color=colour, lw=1, capsize=4,
                        mfc="white", label="+-1.96 exact standard error" if name == "k1" else None)
    ax.axhline(means["exact"]["mean"], color="black", ls="--", lw=1)
    ax.set_xticks(range(3), ["exact KL", "k1", "k3"])
    takeaway = kl_takeaway(summary)
    ratio = takeaway["ratio"] or float("inf")
    ax.set(title=f"(b) open bars: {takeaway['better']}'s own error {ratio:.{0 if ratio >= 10 else 1}f}x smaller",
           ylabel="nats / token")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3, axis="y")


def _regimes_panel(ax, regimes: list[dict]) -> None:
    """Per bin of exact KL: one token's exact sd of k1 and k3 (lines) and their observed rms error (open markers)."""
    x = [r["mean_kl"] for r in regimes]
    for name, colour in (("k1", K1_COLOUR), ("k3", K3_COLOUR)):
        ax.plot(x, [r[f"sd_{name}"] for r in regimes], "-o", color=colour, label=f"{name}: exact sd per token")
        ax.plot(x, [r[f"rmse_{name}"] for r in regimes], "s", color=colour, mfc="white",
                label=f"{name}: observed rms error")
    lowest = min(min(r["sd_k1"], r["sd_k3"], r["rmse_k1"], r["rmse_k3"]) for r in regimes)
    ax.set_ylim(bottom=lowest / 6)  # a free band under the data for each bin's token count
    at = blended_transform_factory(ax.transData, ax.transAxes)
    for r in regimes:
        ax.text(r["mean_kl"], 0.03, f"{r['tokens']:,}", transform=at, ha="center", fontsize=7, color="dimgrey")
    ax.set(xscale="log", yscale="log", xlabel="exact KL at the token's position (bin mean; tokens per bin)",
           ylabel="error of one token's estimate", title="(c) who wins, by divergence regime")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3, which="both")


MODEL_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def plot_pass_at_k(eval_dict: dict, path, names: dict | None = None) -> None:
    """Unbiased pass@k for k = 1..n of every evaluated model, each with its own marker (coinciding curves stay visible)."""
    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    for index, (name, res) in enumerate(eval_dict.items()):
        curve = res.get("pass_at_k_curve") or []
        ax.plot(np.arange(1, len(curve) + 1), curve, marker=MODEL_MARKERS[index % len(MODEL_MARKERS)],
                markersize=8 - index % 4, label=(names or {}).get(name, name), zorder=3 if name == "grpo" else 2)
    ax.set(title="Held-out pass@k (unbiased estimator), every model", xlabel="k", ylabel="pass@k", ylim=(-0.02, 1.02))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save_figure(fig, path)


def plot_pass_at_k_gap(before: list[float], after: list[float], labels: tuple[str, str], path) -> None:
    """pass@k before and after training, the gap shaded and written at k = 1 and k = n (polish closes it as k grows)."""
    k = np.arange(1, min(len(before), len(after)) + 1)
    b, a = np.asarray(before, float)[: len(k)], np.asarray(after, float)[: len(k)]
    fig, ax = plt.subplots(figsize=(7, 2.9), layout="constrained")
    ax.fill_between(k, b, a, where=a >= b, interpolate=True, color=POSITIVE, alpha=0.25, lw=0)
    ax.fill_between(k, b, a, where=a < b, interpolate=True, color=NEGATIVE, alpha=0.25, lw=0)
    ax.plot(k, b, color="black", ls="--", marker="o", label=labels[0])
    ax.plot(k, a, color="#1f77b4", marker="o", label=labels[1])
    gaps = f"gap {100 * (a[0] - b[0]):+.1f} points at k = 1, {100 * (a[-1] - b[-1]):+.1f} at k = {k[-1]}"
    ax.set(title=f"Held-out pass@k: {labels[0]} vs {labels[1]}\n{gaps}", xlabel="k", ylabel="pass@k",
           ylim=(-0.02, 1.02))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    save_figure(fig, path)


def plot_solve_rate_scatter(before_counts, after_counts, n: int, path, labels=("SFT", "GRPO"),
                            seed: int = 0) -> None:
    """Per-problem solve rate c_i / n before vs after training (jittered), coloured by the way each moved."""
    b, a = np.asarray(before_counts, float) / n, np.asarray(after_counts, float) / n
    rng = np.random.default_rng(seed)
    jitter = min(0.25 / n, 0.03)
    colour = np.where(a > b, POSITIVE, np.where(a < b, NEGATIVE, NEUTRAL))
    fig, ax = plt.subplots(figsize=(4.6, 3.4), layout="constrained")
    ax.scatter(b + rng.uniform(-jitter, jitter, b.size), a + rng.uniform(-jitter, jitter, a.size),
               c=list(colour), alpha=0.6, s=22, edgecolors="none")
    ax.plot([0, 1], [0, 1], color="black", lw=0.8, ls="--")
    ax.set(xlim=(-0.07, 1.07), ylim=(-0.07, 1.07), xlabel=f"solve rate, {labels[0]}",
           ylabel=f"solve rate, {labels[1]}", title="Per-problem solve rate (c / n)")
    ax.grid(alpha=0.3)
    save_figure(fig, path)


def solve_rate_pair(eval_results: dict) -> tuple[str, str] | None:
    """(before, after) model names for the solve-rate scatter: SFT (else base) vs GRPO, if both exist."""
    scored = {name for name, e in eval_results.items() if (e or {}).get("per_problem_correct")}
    before = next((m for m in ("sft", "base") if m in scored), None)
    return (before, "grpo") if before and "grpo" in scored else None


def draw_all(results: dict, out_dir: str | Path) -> dict[str, Path]:
    """Every figure ``results`` has data for, drawn into ``out_dir``: {name: png path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train, evals = results.get("train") or {}, results.get("eval") or {}
    paths: dict[str, Path] = {}

    def draw(name: str, plot, *args) -> None:
        paths[name] = out / f"{name}.png"
        plot(*args, paths[name])

    gains = glance.gain_rows(results)
    if any(row["mean_diff"] is not None for row in gains):  # the first screen's figure
        plan = glance.plan_of(results)
        draw("gains_over_sft", lambda path: save_figure(gains_figure(
            gains, glance.model_names(results)[plan["reference"]],
            glance.METRIC_NAMES.get(plan["metric"], plan["metric"]), plan.get("equivalence_margin")), path))
    if train.get("steps"):
        draw("training_curves", plot_training_curves, train["steps"])
    ppo_runs = {name: run["steps"] for name, run in (results.get("runs") or {}).items()
                if run.get("method") == "ppo" and run.get("steps")}
    if ppo_runs:
        grpo = {"grpo": train["steps"]} if train.get("variant") == "grpo" and train.get("steps") else {}
        kl_name = run_words.training_kl_name(results.get("config"))
        draw("ppo_curves", lambda runs, path: plot_ppo_curves(runs, path, kl_name), {**grpo, **ppo_runs})
    if lessons.ppo_lesson(results):  # section 7's evidence, drawn where its "why" is shown
        draw("ppo_score_vs_reward", plot_ppo_score_vs_reward, results["runs"]["ppo"]["steps"])
    if train.get("example_groups"):
        draw("group_advantages", plot_group_advantages, train["example_groups"])
    draw("grpo_vs_ppo", plot_grpo_vs_ppo)
    draw("k1_vs_k3_synthetic", plot_k1_vs_k3_synthetic)
    kl_real = results.get("kl_real") or {}
    if kl_real.get("logp_policy"):
        draw("k1_vs_k3_real", plot_k1_vs_k3_real, kl_real)
    names = glance.prose_names(results)
    if evals:
        draw("pass_at_k", lambda evals, path: plot_pass_at_k(evals, path, names), evals)
    pair = solve_rate_pair(evals)
    if pair:
        before, after = evals[pair[0]], evals[pair[1]]
        labels = tuple(names.get(model, model) for model in pair)
        if before.get("pass_at_k_curve") and after.get("pass_at_k_curve"):
            draw("pass_at_k_gap", plot_pass_at_k_gap, before["pass_at_k_curve"], after["pass_at_k_curve"], labels)
        draw("solve_rate_scatter", lambda path: plot_solve_rate_scatter(
            before["per_problem_correct"], after["per_problem_correct"], after.get("n_samples", 8), path, labels))
    return paths
