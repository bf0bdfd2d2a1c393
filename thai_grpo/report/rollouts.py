"""What the report shows of a run's rollouts (``rollouts.jsonl``: every completion training graded, in TRL's order,
the G of a prompt side by side): groups to browse, and the completions whose think block holds no reasoning."""

from __future__ import annotations

from math import comb

import numpy as np

from thai_grpo.core.rewards import format_reward, hollow_think

HOLLOW_THINKS_KEPT = 8  # a run's hollow-think completions shown: the first half seen, then the latest


def browse_steps(max_steps: int, count: int = 4) -> set[int]:
    """``count`` steps, spread evenly up to the last, whose first group is also kept for the report to browse."""
    return {max(1, round(max_steps * i / count)) for i in range(1, count + 1)} if max_steps > 0 else set()


def group_record(step: int, lines: list[dict], problems: dict) -> dict:
    """One group as the report shows it: question, gold answer, and per completion reward, advantage, text, parts."""
    problem = problems.get(lines[0]["prompt_id"]) or {}
    return {"step": step, "question": problem.get("question"), "gold": problem.get("answer"),
            "rewards": np.asarray([line["reward"] for line in lines], dtype=float).round(4).tolist(),
            "advantages": np.asarray([line["advantage"] for line in lines], dtype=float).round(4).tolist(),
            "completions": [line["completion"] for line in lines], "reward_parts": [line["rewards"] for line in lines]}


def example_groups(rollouts: list[dict], group_size: int, max_steps: int, problems: dict) -> dict:
    """The run's first mixed and all-equal group, and at each ``browse_steps`` its first mixed one (else its first)."""
    steps: dict = {}
    for line in rollouts:
        steps.setdefault(line["step"], []).append(line)
    found, browse = {}, browse_steps(max_steps)
    for step, lines_of_step in sorted(steps.items()):
        kinds: dict = {}
        for lines in (lines_of_step[i:i + group_size] for i in range(0, len(lines_of_step), group_size)):
            rewards = [line["reward"] for line in lines]
            kinds.setdefault("mixed" if max(rewards) - min(rewards) > 1e-8 else "all_equal", lines)
        for kind, lines in kinds.items():
            if kind not in found:  # the run's first group of this kind
                found[kind] = group_record(step, lines, problems)
        if step in browse:
            found[f"step{step}"] = group_record(step, kinds.get("mixed") or kinds["all_equal"], problems)
    return found


def hollow_think_completions(rollouts: list[dict], kept: int = HOLLOW_THINKS_KEPT) -> list[dict]:
    """Completions with a hollow think block, at most ``kept`` per step: the run's first ``kept // 2``, then the latest."""
    per_step: dict = {}
    for line in rollouts:
        found = per_step.setdefault(line["step"], [])
        if len(found) < kept and hollow_think(line["completion"]):
            found.append({"step": line["step"], "reward": round(float(line["reward"]), 4),
                          "completion": line["completion"]})
    ordered = [example for step in sorted(per_step) for example in per_step[step]]
    first = kept // 2
    return ordered if len(ordered) <= kept else ordered[:first] + ordered[first:][first - kept:]


def signal_share(rewards: list[float], size: int) -> float:
    """The share of a group's ``size``-subsets whose rewards differ (the only ones with a learning signal): 1 minus,
    over each distinct reward v held by n_v completions, C(n_v, size) / C(G, size)."""
    counts = np.unique(np.round(np.asarray(rewards, dtype=float), 6), return_counts=True)[1]
    return 1.0 - sum(comb(int(n), size) for n in counts) / comb(len(rewards), size)


def pitfall_numbers(rollouts: list[dict], group_size: int) -> dict:
    """The chapter's pitfalls on a run's own rollouts: completions the strict and the lenient format regex pay, and the
    share of groups with a learning signal had G been 2, 4, ... up to the run's own G."""
    texts = [line["completion"] for line in rollouts]
    groups = [[line["reward"] for line in rollouts[i:i + group_size]] for i in range(0, len(rollouts), group_size)]
    sizes = [g for g in (2, 4, 8, 16) if g < group_size] + [group_size]
    return {"completions": len(texts), "groups": len(groups), "group_size": group_size,
            "format_paid": {"strict": sum(format_reward(t) > 0 for t in texts),
                            "lenient": sum(format_reward(t, lenient=True) > 0 for t in texts)},
            "hollow_paid": sum(hollow_think(t) and format_reward(t) > 0 for t in texts),
            "signal_by_group_size": {str(g): float(np.mean([signal_share(r, g) for r in groups])) for g in sizes}}
