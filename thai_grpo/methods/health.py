"""Run-health checks on the per-step metrics: the ways a GRPO run fails while its reward looks fine
(completions cut at the length limit; reward hacking: length, or paid empty or blank think blocks, up while
accuracy is flat)."""

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



#: The format rewards (thai_grpo.core.rewards) and what a hacked one pays for.
FORMAT_HACKS = {
    "format_lenient": "the lenient format regex is being reward-hacked (<think>.*?</think>: <think></think> earns +0.3)",
    "format": "the strict format regex is being reward-hacked through its loophole (<think>.+?</think>: a whitespace "
              "or one-character block such as <think> </think> earns +0.3)",
    "format_checked": "the content-checked format reward is paying think blocks without reasoning",
}


def format_reward_name(steps: list[dict]) -> str | None:
    """The format reward a run was graded with (the first ``format...`` name among its steps' rewards), or None."""
    for step in steps:
        for name in step.get("rewards") or {}:
            if name.startswith("format"):
                return name
    return None


def _paid_hollow_share(step: dict, reward: str | None) -> float | None:
    """A step's ``hollow_think_paid_share``; a record without it (written before it was kept) counts its empty
    think blocks when the lenient regex, which pays every one of them, is the format reward; otherwise None."""
    if "hollow_think_paid_share" in step:
        return step["hollow_think_paid_share"]
    return step.get("empty_think_share") if reward == "format_lenient" else None


def start_and_last(values, start_steps: int | None = 1) -> tuple[float | None, float | None]:
    """Means of the first ``start_steps`` values (default 1: the start policy's own batch, sampled before any
    update; None: the first third) and of the last third, missing values skipped (``first_and_last``)."""
    return first_and_last(values, start_steps)[0], first_and_last(values)[1]


def format_hacking_suspect(steps: list[dict], min_share: float = 0.1, accuracy_rise: float = 0.02,
                           start_steps: int | None = 1) -> dict:
    """Is the format reward paying think blocks with no reasoning in them? (the chapter: <think></think> plus a
    guessed number, reward up, accuracy flat).

    With H and a the ``hollow_think_paid_share`` (completions a format reward paid for an empty, whitespace-only
    or one-character think block) and ``accuracy`` at the start (the first ``start_steps`` steps; default the
    first step, whose batch the start policy sampled before any update) and over the last third of the steps:
    suspect when H_last >= ``min_share``, H_last > H_start and a_last - a_start < ``accuracy_rise``. The start
    is the first step and not the first third because a hack can set in within a few steps: in the reward-hacking
    experiment the lenient run paid 77% of its completions for empty blocks by step 3, so a first-third baseline
    already held the hack (``start_steps=None`` gives that baseline). Works on any format reward; returns the
    flag, the format reward's name, whether it is the lenient one, and the [start, last third] means of H,
    accuracy, reward and the empty and blank shares (None with fewer than 3 steps or no format reward).
    """
    reward = format_reward_name(steps)
    lenient = reward == "format_lenient"
    if reward is None or len(steps) < 3:
        return {"suspect": False, "format_reward": reward, "lenient_reward": lenient, "means": None}
    means = {key: list(start_and_last([s.get(key) for s in steps], start_steps))
             for key in ("empty_think_share", "blank_think_share", "accuracy", "reward_mean")}
    means["hollow_think_paid_share"] = list(start_and_last([_paid_hollow_share(s, reward) for s in steps],
                                                           start_steps))
    share, accuracy = means["hollow_think_paid_share"], means["accuracy"]
    suspect = (None not in share and None not in accuracy and share[1] >= min_share and share[1] > share[0]
               and accuracy[1] - accuracy[0] < accuracy_rise)
    return {"suspect": bool(suspect), "format_reward": reward, "lenient_reward": lenient, "means": means}


def training_health(steps: list[dict]) -> dict:
    """The flags with a sentence each saying what they mean and what to do; a format reward paying empty or blank
    think blocks while accuracy is flat (``format_hacking_suspect``) raises the reward-hacking flag too."""
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
        share, accuracy = hack["means"]["hollow_think_paid_share"], hack["means"]["accuracy"]
        reward = hack["means"]["reward_mean"]
        moved = f", mean reward {reward[0]:.2f} -> {reward[1]:.2f}" if None not in reward else ""
        messages.append(f"think blocks with no reasoning in them (empty, whitespace or one character) that the format "
                        f"reward paid rose from {share[0]:.0%} of completions at the start to {share[1]:.0%} over the "
                        f"last third of steps while accuracy did not rise ({accuracy[0]:.2f} -> {accuracy[1]:.2f}{moved}): "
                        f"{FORMAT_HACKS.get(hack['format_reward'], 'the format reward is being reward-hacked')}")
    return {"truncation_failed": truncated, "hacking_suspect": hacking or hack["suspect"], "messages": messages,
            "format_hacking": hack}
