"""The reward-hacking detector's error rates, by simulation (seeded).

Honest runs: every step, each of n completions is a paid hollow think block with a steady probability p and correct
with a steady probability a (flat accuracy). Hacked runs: the same, except that during an episode of ``duration``
steps, placed uniformly anywhere after the baseline, the paid hollow share climbs over ``ramp`` steps to a
``plateau`` and holds there, with accuracy still flat (the hardest case: the chapter's hack let accuracy fall). The
false-positive rate is the share of honest runs with any flagged window; the detection rate is the share of hacked
runs with a flagged window that overlaps the episode. Both come from ``health.flagged_windows``, the detector that
judges the real runs.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np

from thai_grpo.analyses.health import DetectorSettings, flagged_windows


def hack_path(n_steps: int, honest_share: float, plateau: float, start: int, duration: int, ramp: int = 2) -> np.ndarray:
    """Per step, the probability of a paid hollow block: ``honest_share`` outside the episode [start, start +
    duration), a linear climb over the episode's first ``ramp`` steps, then ``plateau``."""
    path = np.full(n_steps, float(honest_share))
    for k, t in enumerate(range(start, min(start + duration, n_steps))):
        path[t] = honest_share + (plateau - honest_share) * min(1.0, (k + 1) / max(1, ramp))
    return path


def simulate_runs(rng: np.random.Generator, shares: np.ndarray, accuracy: float, n: int) -> tuple[np.ndarray, ...]:
    """Step records of simulated runs: ``shares`` (runs, steps) of per-step probabilities -> binomial paid hollow
    shares, binomial accuracies at the flat ``accuracy``, and the counts (n per step)."""
    hollow = rng.binomial(n, shares) / n
    correct = rng.binomial(n, accuracy, size=shares.shape) / n
    return hollow, correct, np.full(shares.shape, float(n))


def detector_rates(n_steps: int, completions_per_step: int, honest_share: float = 0.15, accuracy: float = 0.2,
                   plateau: float = 0.8, duration: int = 8, ramp: int = 2, simulations: int = 2000, seed: int = 0,
                   settings: DetectorSettings = DetectorSettings()) -> dict:
    """The detector's false-positive rate on honest runs (steady ``honest_share``) and its detection rate of a
    flat-accuracy hack of ``duration`` steps that climbs to ``plateau`` anywhere after the baseline, each over
    ``simulations`` seeded runs of ``n_steps`` steps of ``completions_per_step`` completions."""
    b = settings.baseline_steps
    if n_steps < b + settings.window or duration < 1 or b + duration > n_steps:
        raise ValueError(f"detector_rates: {n_steps} steps cannot hold a baseline of {b}, a window of "
                         f"{settings.window} and an episode of {duration} steps; use more steps or a shorter episode")
    rng = np.random.default_rng(seed)
    honest = np.full((simulations, n_steps), float(honest_share))
    false_positive = flagged_windows(*simulate_runs(rng, honest, accuracy, completions_per_step), settings).any(1)
    starts = rng.integers(b, n_steps - duration + 1, size=simulations)
    hacked = np.stack([hack_path(n_steps, honest_share, plateau, s, duration, ramp) for s in starts])
    flags = flagged_windows(*simulate_runs(rng, hacked, accuracy, completions_per_step), settings)
    window_first = b + np.arange(flags.shape[1])  # 0-based first step of each window
    overlaps = ((window_first[None, :] < (starts + duration)[:, None])
                & ((window_first + settings.window)[None, :] > starts[:, None]))
    detected = (flags & overlaps).any(1)
    return {"false_positive_rate": float(false_positive.mean()), "detection_rate": float(detected.mean()),
            "simulations": simulations, "seed": seed, "n_steps": n_steps,
            "completions_per_step": completions_per_step, "honest_share": float(honest_share),
            "accuracy": float(accuracy), "plateau": float(plateau), "duration": duration, "ramp": ramp,
            "settings": asdict(settings)}
