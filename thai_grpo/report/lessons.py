"""The chapter's lessons as the report's body shows them: numbers and verdicts only, which template.html.j2 words."""

from __future__ import annotations


from thai_grpo.methods.health import first_and_last

SAMPLE_PROBLEMS, SAMPLE_COMPLETIONS = 3, 2


PITFALL_FIGURES = {"group_size": "pitfall_group_size", "temperature": "pitfall_temperature",
                   "reward_hacking": "pitfall_reward_hacking", "clipping": "pitfall_clipping"}  # drawn by `pitfalls`


def step_means(steps: list[dict], key: str) -> tuple[float | None, float | None]:
    """Mean of ``key`` over the first and the last third of the steps (None when missing)."""
    return first_and_last([s.get(key) for s in steps])


def rises(means: tuple[float | None, float | None]) -> bool:
    """Whether a ``step_means`` pair went up from the first third to the last (False when either is missing)."""
    first, last = means
    return first is not None and last is not None and last > first


def pick_completions(completions: list[dict]) -> list[dict]:
    """Up to SAMPLE_COMPLETIONS completions, one correct and one wrong where the problem has both."""
    right = [c for c in completions if c.get("correct", 0) > 0]
    wrong = [c for c in completions if c.get("correct", 0) <= 0]
    picked = (right[:1] + wrong[:1]) if right and wrong else completions[:SAMPLE_COMPLETIONS]
    return picked[:SAMPLE_COMPLETIONS]


def samples_shown(samples_by_model: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The first SAMPLE_PROBLEMS problems of every model with their chosen completions, numbered as in heldout.jsonl."""
    return {model: [{**p, "number": number, "shown": pick_completions(p.get("completions") or [])}
                    for number, p in enumerate(problems[:SAMPLE_PROBLEMS], 1)]
            for model, problems in samples_by_model.items()}


def sft_slip_rate(config: dict) -> float | None:
    """The share of SFT examples built with a deliberate slip (``corpus.sft_slip_rate``); None for a hub adapter."""
    if (config.get("sft") or {}).get("source") == "hub":
        return None
    rate = (config.get("corpus") or {}).get("sft_slip_rate")
    return float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None


# The calculator's two rules by a run's scale_rewards: divide by the group's std (GRPO) or not (Dr.GRPO); TRL's
# "batch" (the batch's std) is neither, so such a group is not offered to it.
CALCULATOR_SCALES = {"group": "grpo", True: "grpo", "none": "dr_grpo", False: "dr_grpo"}


def stored_groups(results: dict) -> list[dict]:
    """Every group training stored, the main run first, each run's by step, with its rewards and advantages."""
    runs, main = results.get("runs") or {}, (results.get("train") or {}).get("variant") or "grpo"
    stored = {name: run.get("example_groups") or {} for name, run in runs.items()}
    stored.setdefault(main, (results.get("train") or {}).get("example_groups") or {})
    order = [main, *[name for name in stored if name != main]]
    rules = {name: CALCULATOR_SCALES.get((run.get("settings") or {}).get("scale_rewards", "group"))
             for name, run in runs.items() if run.get("method", "grpo") == "grpo"}
    if main not in runs:  # a results.json with the main run's train record only: the default GRPO
        rules[main] = "grpo"
    return [{"run": name, "kind": kind, "step": group.get("step"), "question": group.get("question"),
             "mixed": max(group["rewards"]) > min(group["rewards"]), "calculator": rules.get(name),
             "completions": group.get("completions") or [], "gold": group.get("gold"),
             "reward_names": list((group.get("reward_parts") or [{}])[0]),
             "rows": [{"reward": r, "advantage": a, "completion": c, "parts": p} for r, a, c, p in
                      zip(group.get("rewards") or [], group.get("advantages") or [], group.get("completions") or [],
                          group.get("reward_parts") or [{}] * len(group.get("rewards") or []))]}
            for name in order
            for kind, group in sorted(stored[name].items(), key=lambda item: item[1].get("step") or 0)
            if group.get("rewards")]


def same_group_pairs(groups: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of mixed ``stored_groups``, one per calculator rule (GRPO's std, Dr.GRPO's r - mean), from two runs at
    the same step with the same completions and rewards (both start alike): one group, two advantage rules."""
    pairs, seen = [], {}
    for group in groups:
        if not group["mixed"] or group["calculator"] is None:
            continue
        key = (group["step"], group["question"], tuple(group["completions"]), tuple(r["reward"] for r in group["rows"]))
        first = seen.setdefault(key, group)
        if first["calculator"] != group["calculator"]:
            pairs.append((first, group))
    return pairs


def advantage_lesson(group: dict | None) -> dict | None:
    """Figure 5.1's claim on this run's mixed group: the best answers get a positive advantage (``best_up``), and
    positive rewards below the group mean a negative one (``positive_down``)."""
    if not group or not group.get("rewards"):
        return None
    rewards, advantages = group["rewards"], group.get("advantages") or []
    best = max(rewards)
    best_up = all(a > 0 for r, a in zip(rewards, advantages) if r == best)
    positive_down = sorted({r for r, a in zip(rewards, advantages) if r > 0 and a < 0})
    return {"best": best, "best_up": best_up, "positive_down": positive_down, "agrees": best_up}


def curve_lesson(steps: list[dict]) -> dict | None:
    """The training curves' claims, as ``step_means`` per metric; ``reward_climbs`` when the last third is higher."""
    if len(steps) < 2:
        return None
    keys = ("reward_mean", "frac_groups_nonzero_std", "accuracy", "completion_length_mean")
    means = {key: step_means(steps, key) for key in keys}
    return {"means": means, "steps": len(steps), "reward_climbs": rises(means["reward_mean"])}


def ppo_lesson(results: dict) -> dict | None:
    """Why PPO scores as it does: its reward model's accuracy on held-out pairs (0.5 = chance) and, first -> last
    third of PPO's steps, the reward model's score beside the code rewards; None without both."""
    steps = ((results.get("runs") or {}).get("ppo") or {}).get("steps") or []
    heldout = (results.get("reward_model") or {}).get("heldout") or {}
    if len(steps) < 2 or heldout.get("accuracy") is None:
        return None
    score, reward = step_means(steps, "score_mean"), step_means(steps, "reward_mean")
    return {"rm_accuracy": heldout["accuracy"], "pairs": heldout.get("pairs"), "score": score, "reward": reward,
            "score_rises": rises(score), "reward_rises": rises(reward)}


def side_by_side(samples: dict[str, list[dict]]) -> dict:
    """``samples_shown`` as one row per problem, one column per model: the first completion shown, the solved count."""
    models = list(samples)
    if not models:
        return {"models": [], "rows": []}
    by_id = {model: {p.get("id"): p for p in problems} for model, problems in samples.items()}
    rows = []
    for problem in samples[models[0]]:
        cells = {}
        for model in models:
            p = by_id[model].get(problem.get("id"))
            if p is None:
                continue
            completions = p.get("completions") or []
            cells[model] = {"shown": (p["shown"] or [None])[0], "n": len(completions), "greedy": p.get("greedy"),
                            "solved": sum(c.get("correct", 0) > 0 for c in completions)}
        rows.append({**problem, "cells": cells})
    return {"models": models, "rows": rows}
