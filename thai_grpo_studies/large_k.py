"""Polish versus create at large k: pass@k curves to k = n with problem-bootstrap bands, where two models' curves
cross, and which problems one model solves that the other never does.

Yue et al. (2025) found that RL-trained models win at small k while their base models catch up or win at large k:
RL polishes what pass@k of the base already holds rather than creating new solutions. These functions decide that
from the numbers: each curve and each paired difference gets a 95% percentile bootstrap band over problems (the
same resampled problems for every k and every model, so the bands of a difference are paired).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from thai_grpo.evaluation.passk import pass_at_k
from thai_grpo.report.plotting import plt, save_figure


def pass_at_k_matrix(correct_counts: Sequence[int], n: int) -> np.ndarray:
    """Per problem (rows) the unbiased pass@k for k = 1..n (columns)."""
    return np.array([[pass_at_k(n, int(c), k) for k in range(1, n + 1)] for c in correct_counts], dtype=float)


def bootstrap_indices(num_problems: int, n_boot: int, seed: int) -> np.ndarray:
    """``n_boot`` resamples of ``num_problems`` problem indices with replacement, shape (n_boot, num_problems)."""
    if num_problems < 2:
        raise ValueError(f"a bootstrap over problems needs >= 2 problems, got {num_problems}")
    return np.random.default_rng(seed).integers(0, num_problems, size=(n_boot, num_problems))


def curve_band(matrix: np.ndarray, indices: np.ndarray, confidence: float = 0.95) -> dict[str, list[float]]:
    """Mean over problems of each column (k) with its percentile band over the resamples ``indices``:
    {mean, low, high}, one value per k."""
    matrix = np.asarray(matrix, dtype=float)
    means = np.stack([matrix[rows].mean(axis=0) for rows in indices])  # (n_boot, k)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha], axis=0)
    return {"mean": matrix.mean(axis=0).tolist(), "low": low.tolist(), "high": high.tolist()}


def crossing(difference: dict[str, list[float]]) -> dict:
    """Where a paired difference curve a - b (``curve_band`` of a's rows minus b's, k = 1..n) changes verdict,
    relative to its sign at k = 1: ``first_k_includes_zero`` (the smallest k whose band contains 0: from there the
    difference of the curves is not resolved), ``first_k_reversed`` (the smallest k whose band excludes 0 on the other side:
    a supported crossing), ``first_k_sign_flip`` (the smallest k where the point estimate has the other sign);
    each None when it never happens up to k = n. ``k_reversed``: every k whose band excludes 0 on the other side
    (pointwise bands: n of them, uncorrected for multiplicity), ``includes_zero_at_n``: the band at k = n holds 0.
    ``lead_at_1``: +1, -1 or 0, the sign of the band at k = 1 (0 when it already contains 0)."""
    mean, low, high = (np.asarray(difference[key], dtype=float) for key in ("mean", "low", "high"))
    lead = 1 if low[0] > 0 else -1 if high[0] < 0 else 0
    sign = np.sign(mean[0])

    def first(mask) -> int | None:
        hits = np.flatnonzero(mask)
        return int(hits[0]) + 1 if hits.size else None

    reversed_ = (high < 0 if lead > 0 else low > 0) if lead else np.zeros(mean.size, dtype=bool)
    return {"lead_at_1": lead,
            "first_k_includes_zero": first((low <= 0) & (high >= 0)) if lead else 1,
            "first_k_reversed": first(reversed_),
            "k_reversed": (np.flatnonzero(reversed_) + 1).tolist(),
            "includes_zero_at_n": bool(low[-1] <= 0 <= high[-1]),
            "first_k_sign_flip": first(np.sign(mean) == -sign) if sign else None}


def created_and_lost(counts_after: Sequence[int], counts_before: Sequence[int]) -> dict[str, int]:
    """Per problem, from correct counts out of n samples each: ``created`` = solved at least once by `after`, never
    by `before`; ``lost`` = the reverse; ``both`` and ``neither`` the rest."""
    after, before = np.asarray(counts_after) > 0, np.asarray(counts_before) > 0
    if after.shape != before.shape:
        raise ValueError(f"created/lost needs the same problems: {after.size} vs {before.size}")
    return {"created": int(np.sum(after & ~before)), "lost": int(np.sum(~after & before)),
            "both": int(np.sum(after & before)), "neither": int(np.sum(~after & ~before))}


def large_k_results(scores: dict[str, dict], n_boot: int = 10_000, seed: int = 0,
                    pairs: Sequence[tuple[str, str]] = (("grpo", "sft"), ("grpo", "base"), ("sft", "base"))) -> dict:
    """The large-k document: per model its curve with bands; per pair (after, before) present, the paired
    difference curve with bands, its ``crossing`` and ``created_and_lost``. ``scores``: score_model outputs
    (``per_problem_correct``, ``n_samples``) on the same problems."""
    counts = {model: s["per_problem_correct"] for model, s in scores.items()}
    sizes = {(s["n_samples"], len(s["per_problem_correct"])) for s in scores.values()}
    if len(sizes) != 1:
        raise ValueError(f"models differ in (samples, problems) {sorted(sizes)}: resample them with one setting")
    ((n, problems),) = sizes
    matrices = {model: pass_at_k_matrix(c, n) for model, c in counts.items()}
    indices = bootstrap_indices(problems, n_boot, seed)
    comparisons = {}
    for after, before in pairs:
        if after in matrices and before in matrices:
            difference = curve_band(matrices[after] - matrices[before], indices)
            comparisons[f"{after}_vs_{before}"] = {"after": after, "before": before, "difference": difference,
                                                   "crossing": crossing(difference),
                                                   **created_and_lost(counts[after], counts[before])}
    return {"n_samples": n, "num_problems": problems, "ks": list(range(1, n + 1)), "n_resamples": n_boot,
            "curves": {model: curve_band(m, indices) for model, m in matrices.items()},
            "comparisons": comparisons}


def plot_large_k(passk: dict, path) -> None:
    """pass@k to k = n (results/passk/results.json): (a) each model's curve with its 95% problem-bootstrap band on a
    log-k axis, (b) the paired difference GRPO - SFT with its band, where the band first holds 0 marked."""
    ks = np.asarray(passk["ks"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    for model, curve in passk["curves"].items():
        (line,) = axes[0].plot(ks, curve["mean"], lw=1.8, label=model)
        axes[0].fill_between(ks, curve["low"], curve["high"], alpha=0.2, lw=0, color=line.get_color())
    axes[0].set(xscale="log", xlabel="k (log scale)", ylabel="pass@k", ylim=(0, 1.02),
                title=f"(a) pass@k, {passk['num_problems']} problems x {passk['n_samples']} samples, 95% bands")
    axes[0].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
    comparison = (passk.get("comparisons") or {}).get("grpo_vs_sft")
    if comparison:
        d = comparison["difference"]
        axes[1].fill_between(ks, d["low"], d["high"], alpha=0.25, lw=0, color="#5f3dc4")
        axes[1].plot(ks, d["mean"], color="#5f3dc4", lw=1.8, label="GRPO - SFT (paired)")
        axes[1].axhline(0, color="black", lw=1)
        meet = comparison["crossing"]["first_k_includes_zero"]
        if meet:
            axes[1].axvline(meet, color="grey", ls=":", label=f"band first holds 0: k = {meet}")
        axes[1].set(xscale="log", xlabel="k (log scale)", ylabel="difference in pass@k",
                    title=f"(b) created {comparison['created']}, lost {comparison['lost']} problems in "
                          f"{passk['n_samples']} tries")
        axes[1].legend(fontsize=8)
    save_figure(fig, path)
