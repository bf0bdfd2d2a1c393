"""The chapter's lessons as the report's body shows them: numbers and verdicts only, which template.html.j2 words."""

from __future__ import annotations

import numpy as np

from thai_grpo.core.rewards import FORMAT_REWARD, THAI_REWARD
from thai_grpo.evaluation.plan import VERDICTS
from thai_grpo.analyses import kl
from thai_grpo.analyses.health import step_means
from thai_grpo.report import glance
from thai_grpo.report.verdicts import pair_test, versus_verdict

SAMPLE_PROBLEMS, SAMPLE_COMPLETIONS = 3, 2
SIDE_BY_SIDE_PROBLEMS = 2  # the body's side-by-side rows (the appendix has every SAMPLE_PROBLEMS)
PITFALL_FIGURES = {"group_size": "pitfall_group_size", "temperature": "pitfall_temperature",
                   "reward_hacking": "pitfall_reward_hacking", "clipping": "pitfall_clipping"}  # drawn by `pitfalls`


def rises(means: tuple[float | None, float | None]) -> bool:
    """Whether a ``step_means`` pair went up from the first third to the last (False when either is missing)."""
    first, last = means
    return first is not None and last is not None and last > first


def pick_completions(completions: list[dict]) -> list[dict]:
    """Up to SAMPLE_COMPLETIONS completions, one correct and one wrong where the problem has both."""
    right = [c for c in completions if c.get("correct", 0) > 0]
    wrong = [c for c in completions if c.get("correct", 0) <= 0]
    return right[:1] + wrong[:1] if right and wrong else completions[:SAMPLE_COMPLETIONS]


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
    """Pairs of mixed ``stored_groups`` from two runs with different calculator rules, same step, completions, rewards."""
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
    """Figure 5.1's claim on this run's mixed group: the best answers up, positive rewards below the mean down."""
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
    """Why PPO scores as it does: its reward model's held-out accuracy, its score and the code reward over the steps."""
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
    for problem in samples[models[0]][:SIDE_BY_SIDE_PROBLEMS]:
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


def departure(run: dict, key: str) -> dict | None:
    """The run card's departure from the chapter at ``key`` (``grpo.learning_rate``), or None where it has none."""
    return next((d for d in run.get("chapter_departures") or [] if d["key"] == key), None)


def kl_lesson(results: dict, takeaway: dict | None) -> dict | None:
    """Why this run's tokens favour the estimator they do: its learning rate against the chapter's, the KL training
    reached, where k3 has the lower variance, and how often a single k1 is negative."""
    kl_real = results.get("kl_real") or {}
    summary = kl_real.get("summary")
    if not summary or not takeaway:
        return None
    lr = departure(results.get("run") or {}, "grpo.learning_rate")
    logp, logq = np.asarray(kl_real.get("logp_policy") or [], float), np.asarray(kl_real.get("logp_ref") or [], float)
    return {"better": takeaway["better"], "lr": {**lr, "factor": lr["value"] / lr["chapter"]} if lr else None,
            "train_kl": step_means((results.get("train") or {}).get("steps") or [], "kl")[1],
            "exact_kl": summary["means"]["exact"]["mean"], "share_k3": summary["share_k3_lower_variance"],
            "k1_negative": float(np.mean(kl.k1(logp, logq) < 0)) if logp.size else None}


def unanimity(rewards: list[float]) -> dict:
    """The commonest reward of a group, how many share it, and the lone other one's index when all but one agree."""
    values, counts = np.unique(rewards, return_counts=True)
    common = int(np.argmax(counts))
    near = int(counts[common]) == len(rewards) - 1
    lone = next(i for i, r in enumerate(rewards) if r != values[common]) if near else None
    return {"reward": float(values[common]), "count": int(counts[common]), "size": len(rewards),
            "near_unanimous": near, "lone": lone}


def dr_grpo_lesson(results: dict, pair: tuple[dict, dict] | None) -> dict | None:
    """One group under GRPO's and Dr.GRPO's rules (the lone answer's advantage each), and Dr.GRPO's test against GRPO."""
    test = pair_test((results.get("comparison") or {}).get("pairwise") or [], "dr_grpo", "grpo")
    names = glance.prose_names(results)
    verdict = (versus_verdict(test, names.get("dr_grpo", "Dr.GRPO"), names.get("grpo", "GRPO"), trained_from=False)
               if test and test.get("verdict") in VERDICTS else None)
    verdict = {"verdict": verdict, "test_verdict": test.get("verdict")} if verdict else {"verdict": None}
    if not pair:
        return verdict if verdict["verdict"] else None
    grpo, dr = pair if pair[0]["calculator"] == "grpo" else pair[::-1]
    shape = unanimity([row["reward"] for row in grpo["rows"]])
    lone = shape["lone"]
    return {**shape, **verdict, "lone_reward": grpo["rows"][lone]["reward"] if shape["near_unanimous"] else None,
            "grpo": grpo["rows"][lone]["advantage"] if shape["near_unanimous"] else None,
            "dr": dr["rows"][lone]["advantage"] if shape["near_unanimous"] else None}


def reward_floor(steps: list[dict], groups: list[dict]) -> dict | None:
    """The share of step 1's completions already paid the format and the Thai reward, and the distinct rewards of the
    main run's stored groups: with both paid from the start, a group's rewards differ only by correctness."""
    first = (steps[0].get("rewards") or {}) if steps else {}
    if "format" not in first or "thai" not in first:
        return None
    values = sorted({row["reward"] for g in groups if g["run"] == groups[0]["run"] for row in g["rows"]})
    return {"format": first["format"] / FORMAT_REWARD, "thai": first["thai"] / THAI_REWARD, "values": values}


def length_lesson(results: dict) -> dict | None:
    """Completion length over training against the budgets, SFT's length and the truncated share."""
    steps, run = (results.get("train") or {}).get("steps") or [], results.get("run") or {}
    length = step_means(steps, "completion_length_mean")
    if None in length:
        return None
    budget = departure(run, "grpo.max_completion_length")
    return {"first": length[0], "last": length[1], "grows": length[1] > 1.2 * length[0],  # health's 20%
            "budget": ((results.get("config") or {}).get("grpo") or {}).get("max_completion_length"),
            "chapter_budget": budget["chapter"] if budget else None,
            "sft_length": ((results.get("eval") or {}).get("sft") or {}).get("mean_completion_length"),
            "truncated": step_means(steps, "clipped_ratio")[1]}


def clip_lesson(results: dict) -> dict | None:
    """GRPO's clip fraction: zero at every step when each batch is used once (on-policy, the ratio is exactly 1)."""
    steps = (results.get("train") or {}).get("steps") or []
    clips = [s["clip_ratio"] for s in steps if s.get("clip_ratio") is not None]
    if not clips:
        return None
    grpo = (results.get("config") or {}).get("grpo") or {}
    return {"steps": len(clips), "never": max(clips) == 0, "mean": float(np.mean(clips)),
            "num_iterations": grpo.get("num_iterations", 1), "epsilon": grpo.get("epsilon")}


def cost_lesson(results: dict, methods: list[dict]) -> dict | None:
    """What peak memory measures: the base's float32 size against the methods' peaks, and whether SFT's is a load."""
    peaks = {m["method"]: m["peak_memory_mb"] for m in methods if m.get("model") not in ("base", "sft")
             and isinstance(m.get("peak_memory_mb"), (int, float))}
    parameters = ((results.get("run") or {}).get("model") or {}).get("base_parameters")
    if not peaks or not parameters:
        return None
    sft = next((m for m in methods if m.get("model") == "sft"), {})
    return {"model_mb": 4 * parameters / 1e6, "parameters": parameters, "peaks": peaks,
            "runtime_dominates": 4 * parameters / 1e6 < 0.1 * min(peaks.values()),
            "sft_shipped": ((results.get("config") or {}).get("sft") or {}).get("source") == "shipped",
            "sft_seconds": sft.get("train_seconds"), "sft_mb": sft.get("peak_memory_mb")}


def health_numbers(steps: list[dict], health: dict) -> dict:
    """The numbers behind each health badge: truncated share, length and accuracy, hollow thinks paid, lost updates."""
    return {"truncated": step_means(steps, "clipped_ratio")[1], "length": step_means(steps, "completion_length_mean"),
            "accuracy": step_means(steps, "accuracy"), "hollow": step_means(steps, "hollow_think_paid_share"),
            "lost": sum((health.get("lost_updates") or {}).values())}
