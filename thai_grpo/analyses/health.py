"""Run-health checks on the per-step metrics: the ways a GRPO run fails while its reward looks fine."""

from __future__ import annotations

import itertools
import warnings
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np


def first_and_last(values, window: int | None = None) -> tuple[float | None, float | None]:
    """Means of the first and the last ``window`` values (default a third), skipping None and NaN (None if none)."""
    values = np.array(list(values), dtype=float)
    w = window or max(1, len(values) // 3)
    first, last = values[:w], values[-w:]
    return tuple(float(np.nanmean(part)) if np.isfinite(part).any() else None for part in (first, last))


def step_means(steps: list[dict], key: str) -> tuple[float | None, float | None]:
    """Mean of ``key`` over the first and the last third of the steps (None when missing)."""
    return first_and_last([s.get(key) for s in steps])


def hacking_suspect(steps: list[dict], length_rise: float = 0.20, accuracy_rise: float = 0.02) -> bool:
    """Length up while accuracy is flat (first vs last third of the steps): L_last > (1 + length_rise) * L_first and
    a_last - a_first < accuracy_rise. Fewer than 3 steps: False."""
    length, accuracy = step_means(steps, "completion_length_mean"), step_means(steps, "accuracy")
    if len(steps) < 3 or None in length or None in accuracy:
        return False
    return length[1] > (1.0 + length_rise) * length[0] and accuracy[1] - accuracy[0] < accuracy_rise


def truncation_failed(steps: list[dict], threshold: float = 0.9) -> bool:
    """Completions hit max_completion_length: mean `clipped_ratio` over the last third >= threshold."""
    last = step_means(steps, "clipped_ratio")[1]
    return last is not None and last >= threshold


#: The format rewards (thai_grpo.core.rewards) and what a hacked one pays for.
FORMAT_HACKS = {
    "format_lenient": "the lenient format regex is being reward-hacked (<think>.*?</think>: <think></think> earns +0.3)",
    "format": "the strict format regex is being reward-hacked through its loophole (<think>.+?</think>: a whitespace "
              "or one-character block such as <think> </think> earns +0.3)",
    "format_checked": "the content-checked format reward is paying think blocks without reasoning",
}


def format_reward_name(steps: list[dict]) -> str | None:
    """The format reward a run was graded with (the first ``format...`` among its steps' rewards), or None."""
    for step in steps:
        for name in step.get("rewards") or {}:
            if name.startswith("format"):
                return name
    return None


@dataclass(frozen=True)
class DetectorSettings:
    """The episode detector's knobs (config ``hacking.detector``, whose schema describes each)."""
    window: int = 3
    baseline_steps: int = 2
    alpha: float = 0.05
    min_share: float = 0.1
    completions_per_step: int = 64


def detector_z(n_windows: int, alpha: float) -> float:
    """z of the margin, one-sided and Bonferroni over ``n_windows``: an honest run is flagged with probability <= alpha."""
    return NormalDist().inv_cdf(1.0 - alpha / max(1, n_windows))


def _noise_sd(values: np.ndarray) -> np.ndarray:
    """Per-step SD, 1.4826 x median |step-to-step change| / sqrt(2): the median ignores a level shift's two jumps."""
    changes = np.abs(np.diff(values, axis=-1))
    with warnings.catch_warnings():  # a run without the metric: all-NaN, no noise estimate (the binomial SE stays)
        warnings.simplefilter("ignore", RuntimeWarning)
        return 1.4826 * np.nanmedian(changes, axis=-1) / np.sqrt(2.0)


def _window_test(values, counts, baseline: int, window: int, z: float):
    """Per window after the baseline: the window mean minus the baseline mean (weighted by completions) and the margin
    z x SE, SE = max(binomial SE of the two shares with pooled p, the run's per-step SD x sqrt(1/w + 1/b))."""
    values, counts = np.atleast_2d(values), np.atleast_2d(counts)
    weighted = np.nan_to_num(values) * counts
    present = np.where(np.isnan(values), 0.0, counts)
    base_n = present[:, :baseline].sum(1, keepdims=True)
    base = weighted[:, :baseline].sum(1, keepdims=True) / np.maximum(base_n, 1)
    sums = np.lib.stride_tricks.sliding_window_view(weighted[:, baseline:], window, axis=1).sum(-1)
    ns = np.lib.stride_tricks.sliding_window_view(present[:, baseline:], window, axis=1).sum(-1)
    mean = sums / np.maximum(ns, 1)
    pooled = (base * base_n + mean * ns) / np.maximum(base_n + ns, 1)
    binomial = np.sqrt(pooled * (1 - pooled) * (1 / np.maximum(base_n, 1) + 1 / np.maximum(ns, 1)))
    empirical = np.nan_to_num(_noise_sd(values))[:, None] * np.sqrt(1 / window + 1 / baseline)
    valid = (ns > 0) & (base_n > 0)
    return mean - base, z * np.maximum(binomial, empirical), mean, base[:, 0], valid


def flagged_windows(share, accuracy, counts, settings: DetectorSettings) -> np.ndarray:
    """Boolean (runs, windows): the paid hollow share rose past its margin to ``min_share``, accuracy within its own."""
    share, accuracy = np.atleast_2d(share), np.atleast_2d(accuracy)
    n_windows = share.shape[1] - settings.baseline_steps - settings.window + 1
    if n_windows < 1:
        return np.zeros((share.shape[0], 0), dtype=bool)
    z = detector_z(n_windows, settings.alpha)
    rise, margin, mean, _, valid = _window_test(share, counts, settings.baseline_steps, settings.window, z)
    acc_rise, acc_margin, _, _, acc_valid = _window_test(accuracy, counts, settings.baseline_steps,
                                                         settings.window, z)
    return valid & acc_valid & (rise > margin) & (mean >= settings.min_share) & (acc_rise <= acc_margin)


def episodes_from_flags(flags, share, accuracy, steps: list[int], settings: DetectorSettings) -> list[dict]:
    """Runs of overlapping flagged windows as episodes, trimmed to the steps at least half-way from baseline to peak."""
    b, w = settings.baseline_steps, settings.window
    covered = np.zeros(len(steps), dtype=bool)
    for i in np.flatnonzero(flags):
        covered[b + i:b + i + w] = True
    base = np.nanmean(share[:b]) if np.isfinite(share[:b]).any() else 0.0
    episodes = []
    for run_covered, run in itertools.groupby(range(len(steps)), key=lambda i: covered[i]):
        if not run_covered:
            continue
        part = np.array(list(run))
        peak_at = part[np.nanargmax(share[part])]
        strong = part[share[part] >= base + (share[peak_at] - base) / 2]
        first, last = int(strong.min()), int(strong.max())
        inside = slice(first, last + 1)
        episodes.append({"first_step": steps[first], "last_step": steps[last], "steps": last - first + 1,
                         "peak_share": float(share[peak_at]), "peak_step": steps[peak_at],
                         "mean_share": float(np.nanmean(share[inside])),
                         "mean_accuracy": float(np.nanmean(accuracy[inside])) if np.isfinite(accuracy[inside]).any()
                         else None})
    return episodes


def hacking_episodes(steps: list[dict], settings: DetectorSettings = DetectorSettings()) -> dict:
    """Episodes where the format reward paid hollow think blocks well above the baseline while accuracy did not rise:
    H_w - H_b > z x SE_H, H_w >= ``min_share``, a_w - a_b <= z x SE_a; ``status`` "stayed", "left" or None."""
    reward = format_reward_name(steps)
    b, w = settings.baseline_steps, settings.window
    empty = {"episodes": [], "status": None, "format_reward": reward, "baseline": None, "z": None,
             "settings": asdict(settings), "counts": None}
    if reward is None or len(steps) < b + w:
        return empty
    share = np.array([s.get("hollow_think_paid_share") for s in steps], dtype=float)  # NaN where missing
    accuracy = np.array([s.get("accuracy") for s in steps], dtype=float)
    counts = np.array([s.get("num_completions") or s.get("batch_size") or settings.completions_per_step
                       for s in steps], dtype=float)
    if not np.isfinite(share).any():
        return empty
    flags = flagged_windows(share, accuracy, counts, settings)[0]
    numbers = [s.get("step", i + 1) for i, s in enumerate(steps)]
    episodes = episodes_from_flags(flags, share, accuracy, numbers, settings)
    read = all(s.get("num_completions") or s.get("batch_size") for s in steps)
    baseline = {"first_step": numbers[0], "last_step": numbers[b - 1], "share": float(np.nanmean(share[:b])),
                "accuracy": float(np.nanmean(accuracy[:b])) if np.isfinite(accuracy[:b]).any() else None,
                "completions_per_step": float(np.mean(counts[:b]))}
    return {**empty, "episodes": episodes, "status": ("stayed" if flags[-1] else "left") if episodes else None,
            "baseline": baseline, "z": detector_z(len(flags), settings.alpha), "counts": "read" if read else "assumed"}


def format_hacking_suspect(steps: list[dict], settings: DetectorSettings = DetectorSettings()) -> dict:
    """``hacking_episodes`` plus ``suspect`` (any episode) and ``lenient_reward`` (the chapter's hack)."""
    found = hacking_episodes(steps, settings)
    return {**found, "suspect": bool(found["episodes"]), "lenient_reward": found["format_reward"] == "format_lenient"}


def episode_text(episode: dict) -> str:
    """'steps 6-14' (or 'step 6')."""
    first, last = episode["first_step"], episode["last_step"]
    return f"step {first}" if first == last else f"steps {first}-{last}"


def lost_update_counts(steps: list[dict]) -> dict:
    """Updates the float16 loss scaler skipped and updates made from non-finite gradients, over a run's step records."""
    return {total: sum(int(step.get(total, step.get(flag, 0))) for step in steps)
            for total, flag in (("optimizer_steps_skipped", "optimizer_step_skipped"),
                                ("nonfinite_grad_steps", "nonfinite_grad"))}


def training_health(steps: list[dict]) -> dict:
    """The health flags (truncation, reward hacking by length or format, lost updates), each with what to do."""
    truncated, hacking, hack = truncation_failed(steps), hacking_suspect(steps), format_hacking_suspect(steps)
    lost = lost_update_counts(steps)
    messages = []
    if any(lost.values()):
        messages.append(f"updates lost: {lost['optimizer_steps_skipped']} optimizer steps skipped by the float16 loss "
                        f"scaler (their gradients overflowed) and {lost['nonfinite_grad_steps']} with non-finite "
                        "gradients, so the run made fewer updates than its schedule; train in bfloat16 where the GPU "
                        "has it, or lower the learning rate")
    if truncated:
        messages.append("failed run: the mean clipped ratio over the last third of steps is >= 0.9, so nearly every "
                        "completion hits max_completion_length and few reach a final answer; raise the limit or "
                        "shorten the thinking")
    if hacking:
        messages.append("completion length rose by more than 20% from the first to the last third of steps while "
                        "accuracy rose by less than 0.02: suspect reward hacking first (check the format regex)")
    if hack["suspect"]:
        base = hack["baseline"]
        accuracy = f"{base['accuracy']:.2f}" if base["accuracy"] is not None else "n/a"
        episodes = "; ".join(
            f"{episode_text(e)}: peak {e['peak_share']:.0%} at step {e['peak_step']}, accuracy "
            + (f"{e['mean_accuracy']:.2f}" if e["mean_accuracy"] is not None else "n/a") for e in hack["episodes"])
        where = "and the run ended in it" if hack["status"] == "stayed" else "and the run left it"
        messages.append(f"think blocks with no reasoning in them (empty, whitespace or one character) that the format "
                        f"reward paid rose above their {base['share']:.0%} at the start "
                        f"({episode_text(base)}, accuracy {accuracy}) by more than the noise margin while accuracy did not rise ({episodes}) "
                        f"{where}: {FORMAT_HACKS.get(hack['format_reward'], 'the format reward is being reward-hacked')}")
    return {"truncation_failed": truncated, "hacking_suspect": hacking or hack["suspect"],
            "updates_lost": any(lost.values()), "lost_updates": lost, "messages": messages, "format_hacking": hack}
