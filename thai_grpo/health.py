"""Run-health checks on the per-step metrics: the ways a GRPO run fails while its reward looks fine
(completions cut at the length limit; reward hacking: length or empty think blocks up, accuracy flat)."""

from __future__ import annotations

import numpy as np


def first_and_last(values, window: int | None = None) -> tuple[float | None, float | None]:
    """Means of the first and the last ``window`` values (default: a third of them, at least one), skipping
    missing ones (None, NaN); a part with no value at all is None. How every check compares a run's start and end."""
    values = np.array([np.nan if v is None else v for v in values], dtype=float)
    w = window or max(1, len(values) // 3)
    first, last = values[:w], values[-w:]
    return tuple(float(np.nanmean(part)) if np.isfinite(part).any() else None for part in (first, last))


def _thirds(steps: list[dict], key: str, window: int | None) -> tuple[float, float] | None:
    """``first_and_last`` of ``key`` over the steps; None with fewer than 3 steps or a part without values."""
    if len(steps) < 3:
        return None
    means = first_and_last([s.get(key) for s in steps], window)
    return None if None in means else means


def hacking_suspect(
    steps: list[dict], window: int | None = None, length_rise: float = 0.20, accuracy_rise: float = 0.02
) -> bool:
    """Length up while accuracy is flat: the first symptom of reward hacking.

    With L and a the mean `completion_length_mean` and `accuracy` over the first and the last `window`
    steps (default a third of the run): suspect when L_last > (1 + length_rise) * L_first and
    a_last - a_first < accuracy_rise. Fewer than 3 steps: False (nothing to compare).
    """
    length = _thirds(steps, "completion_length_mean", window)
    accuracy = _thirds(steps, "accuracy", window)
    if length is None or accuracy is None:
        return False
    return length[1] > (1.0 + length_rise) * length[0] and accuracy[1] - accuracy[0] < accuracy_rise


def truncation_failed(steps: list[dict], threshold: float = 0.9, window: int | None = None) -> bool:
    """Completions hit max_completion_length: mean `clipped_ratio` over the last third >= threshold."""
    if not steps:
        return False
    last = first_and_last([s.get("clipped_ratio") for s in steps], window)[1]
    return last is not None and last >= threshold



def format_hacking_suspect(steps: list[dict], min_share: float = 0.1, accuracy_rise: float = 0.02) -> dict:
    """Has the run learned the lenient regex's hack? (the chapter: reward up, accuracy flat, <think></think>).

    With the lenient format reward in use (``format_lenient`` among the step's rewards) and E, a, r the mean
    ``empty_think_share``, ``accuracy`` and ``reward_mean`` over the first and the last third of the steps:
    suspect when E_last >= ``min_share``, E_last > E_first and a_last - a_first < ``accuracy_rise``.
    Returns the flag and the six means (None with fewer than 3 steps or without the lenient reward).
    """
    lenient = any("format_lenient" in (s.get("rewards") or {}) for s in steps)
    if not lenient or len(steps) < 3:
        return {"suspect": False, "lenient_reward": lenient, "means": None}
    means = {key: list(first_and_last([s.get(key) for s in steps])) for key in ("empty_think_share", "accuracy", "reward_mean")}
    share, accuracy = means["empty_think_share"], means["accuracy"]
    suspect = (None not in share and None not in accuracy and share[1] >= min_share and share[1] > share[0]
               and accuracy[1] - accuracy[0] < accuracy_rise)
    return {"suspect": bool(suspect), "lenient_reward": True, "means": means}


def training_health(steps: list[dict]) -> dict:
    """The flags with a sentence each saying what they mean and what to do; an empty-think hack of the
    lenient format reward (``format_hacking_suspect``) raises the reward-hacking flag too."""
    truncated, hacking, hack = truncation_failed(steps), hacking_suspect(steps), format_hacking_suspect(steps)
    messages = []
    if truncated:
        messages.append("failed run: the mean clipped ratio over the last third of steps is >= 0.9, so nearly every "
                        "completion hits max_completion_length and few reach a final answer; raise the limit or "
                        "shorten the thinking")
    if hacking:
        messages.append("completion length rose by more than 20% from the first to the last third of steps while "
                        "accuracy rose by less than 0.02: suspect reward hacking first (check the format regex)")
    if hack["suspect"]:
        share = hack["means"]["empty_think_share"]
        messages.append(f"empty think blocks rose from {share[0]:.0%} to {share[1]:.0%} of completions while accuracy "
                        "stayed flat: the lenient format regex is being reward-hacked (<think></think> earns +0.3)")
    return {"truncation_failed": truncated, "hacking_suspect": hacking or hack["suspect"], "messages": messages,
            "format_hacking": hack}
