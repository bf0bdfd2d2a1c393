"""The run's own words: what it ran on, which base model, which methods and what each keeps in memory, the rewards
it was graded by, and what it departs from. Each comes from results.json (the run card ``run``, the comparison rows
``comparison.methods``, the runs' settings), so the report of another run, on another machine or model, never repeats
this one's claims; the template only places them.
"""

from __future__ import annotations

from thai_grpo.core.rewards import REWARD_WORDS
from thai_grpo.report.results import METHODS, VERIFIER

DEVICE_NAMES = {"cpu": "a CPU", "gpu": "a GPU", "cpu and gpu": "a CPU and a GPU"}
CHAPTER_REWARDS = ["correct", "format", "thai"]
PAIR_LABELS = (METHODS["ppo"][1], METHODS["dpo"][1])


def join_words(words: list[str]) -> str:
    """['a'] -> 'a'; ['a', 'b'] -> 'a and b'; ['a', 'b', 'c'] -> 'a, b and c'."""
    words = list(words)
    return " and ".join(words) if len(words) < 3 else f"{', '.join(words[:-1])} and {words[-1]}"


def count_words(n: int | float | None) -> str | None:
    """596049920 -> '596M', 1100000 -> '1.1M', 28608 -> '28.6K', 448 -> '448' (3 significant figures at most)."""
    if n is None:
        return None
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= size:
            value = n / size
            return f"{value:.3g}{unit}" if value < 1000 else f"{value:.0f}{unit}"
    return f"{int(n)}"


# --------------------------------------------------------------------------- the machine
def device_of(run: dict) -> dict:
    """Where the run trained: the run card's ``device`` (``results.run_device``: the trainers' recorded arguments),
    else, for a run card written before it was kept, what the torch build says (a ``+cpu`` build has no CUDA, so
    the run was on a CPU); ``kind`` None when neither tells."""
    recorded = run.get("device") or {}
    if recorded.get("kind"):
        return recorded
    torch = (run.get("versions") or {}).get("torch") or ""
    if torch.endswith("+cpu"):
        return {"kind": "cpu", "stages": {}, "source": f"torch {torch} is a CPU-only build"}
    return {"kind": None, "stages": {}, "source": "not recorded"}


def device_words(run: dict) -> str | None:
    """'a GPU', 'a CPU', 'a CPU and a GPU', or None when the run card does not say."""
    return DEVICE_NAMES.get(device_of(run)["kind"])


def device_text(run: dict) -> str:
    """The run card's row: each device with the stages that trained on it and their precision, and how it is known:
    'GPU, bf16 mixed precision: grpo, dr_grpo, dpo (from the trainers' recorded arguments)'."""
    device = device_of(run)
    if not device["kind"]:
        return "not recorded"
    groups: dict[str, list[str]] = {}
    for stage, where in (device.get("stages") or {}).items():
        label = where["device"].upper() + (f", {where['precision']}" if where.get("precision") else "")
        groups.setdefault(label, []).append(stage)
    if not groups:
        return f"{device['kind'].upper()} ({device['source']})"
    return "; ".join(f"{label}: {', '.join(stages)}" for label, stages in groups.items()) + f" ({device['source']})"


def peak_memory_words(run: dict) -> str:
    """What the costs table's peak memory (Snakemake's max_rss) measures on this run's device."""
    kind = device_of(run)["kind"]
    if kind == "cpu":
        return ("Peak memory is Snakemake's max_rss of the training job: the resident memory of its processes, which "
                "on a CPU holds the models, their activations and the optimizer state.")
    if kind in ("gpu", "cpu and gpu"):
        return ("Peak memory is Snakemake's max_rss of the training job: the resident host memory of its processes; "
                "memory on the GPU, where the models trained, is not in it.")
    return ("Peak memory is Snakemake's max_rss of the training job: the resident host memory of its processes (GPU "
            "memory, if a GPU was used, is not in it).")


# --------------------------------------------------------------------------- the model and the methods
def model_words(run: dict) -> str:
    """'Qwen/Qwen3-0.6B, 596M parameters'; the base as the run card names it, with its size when recorded."""
    model = run.get("model") or {}
    size = count_words(model.get("base_parameters"))
    return (model.get("base") or "a base model not recorded") + (f", {size} parameters" if size else "")


def reward_words(rewards: list[str] | None) -> str:
    """'correct answer +1, non-empty think block +0.3, Thai script +0.2' for the rewards a run was graded by."""
    return ", ".join(REWARD_WORDS.get(name, name) for name in rewards or CHAPTER_REWARDS)


def trained_rows(results: dict) -> list[dict]:
    """The comparison rows that ran, but the base (not trained) and SFT (the adapter every other starts from)."""
    return [row for row in (results.get("comparison") or {}).get("methods") or []
            if row.get("run") and row.get("model") not in ("base", "sft")]


def memory_words(rows: list[dict]) -> str | None:
    """What each method keeps in memory, from its own row, methods with the same models grouped: 'PPO keeps 4 (policy,
    reference, reward model, value model: separate copies here); DPO and GRPO keep 2 (policy, reference; ...)'."""
    groups: dict[str, list[str]] = {}
    for row in rows:
        if row.get("models_in_memory"):
            groups.setdefault(row["models_in_memory"], []).append(row["method"])
    parts = [f"{join_words(names)} keep{'s' if len(names) == 1 else ''} {models}" for models, names in groups.items()]
    return "; ".join(parts) if parts else None


def supervision_words(rows: list[dict]) -> str | None:
    """The costs read from supervision to verification, for the methods present: 'human labels go from one
    reference answer per example (SFT), to preference pairs, here ranked by the verifier (PPO, DPO), to none, only a
    verifier (GRPO, Dr.GRPO)'; None with fewer than two kinds of supervision present."""
    def names(test) -> list[str]:
        return [row["method"] for row in rows if test(row.get("human_labels"))]

    steps = [("one reference answer per example", ["SFT"]),
             ("preference pairs, here ranked by the verifier", names(lambda labels: labels in PAIR_LABELS)),
             ("none, only a verifier", names(lambda labels: labels == VERIFIER))]
    present = [f"{what} ({', '.join(who)})" for what, who in steps if who]
    return "human labels go from " + ", to ".join(present) if len(present) > 1 else None


def sampling_words(rows: list[dict]) -> str | None:
    """Where each present method's generated tokens come from: the methods that sample while training (the
    rollouts), DPO (its pairs, drawn once from the SFT model) and, with a learned reward model, where PPO's pairs
    came from and who ranked them."""
    dpo = [r["method"] for r in rows if r.get("human_labels") == METHODS["dpo"][1]]
    ppo = [r["method"] for r in rows if r.get("human_labels") == METHODS["ppo"][1]]
    own = [r["method"] for r in rows if r["method"] not in dpo]
    parts = []
    if own:
        parts.append(f"{join_words(own)} sample{'s' if len(own) == 1 else ''} {'its' if len(own) == 1 else 'their'} "
                     "own completions while training (generated tokens: the rollouts)")
    if dpo:
        parts.append(f"{join_words(dpo)} samples none while training: its pairs were drawn once from the SFT model "
                     "(generated tokens: those samples)")
    if ppo:
        source = f"the same pairs as {join_words(dpo)}" if dpo else "pairs of the SFT model's own samples"
        parts.append(f"the reward model of {join_words(ppo)} learned from {source}, ranked by the verifier, not by "
                     "people (chosen = a correct SFT sample, rejected = a wrong one), so it can at best imitate the "
                     "code that grades")
    if not parts:
        return None
    text = "; ".join(parts) + "."
    return text[0].upper() + text[1:]


def leakage_words(run: dict) -> str:
    """What the split checked, as it recorded it (``run.data.leakage_check``): text and skeleton for synthetic
    problems, the normalized text alone for real data (which has no skeletons)."""
    check = (run.get("data") or {}).get("leakage_check") or "text hash"
    if "skeleton" in check:
        return ("Held-out problems share neither text nor skeleton (template and operand sequence) with any training "
                f"set ({check}, checked by the split).")
    return f"Held-out problems share no normalized text with any training set ({check}, checked by the split)."


def departures_words(run: dict) -> str | None:
    """'14 settings depart from the chapter's experiment (run card)'; 'every setting the chapter fixes is the
    chapter's'; None when the run card did not compute them."""
    if "chapter_departures" not in run or run["chapter_departures"] is None:
        return None
    count = len(run["chapter_departures"])
    if not count:
        return "Every setting the chapter fixes is the chapter's."
    return f"{count} setting{'s' if count != 1 else ''} depart{'s' if count == 1 else ''} from the chapter's " \
           "experiment, each with its reason in the run card."


def lead(results: dict) -> str:
    """The page's first sentences: the model, the adapter, the device, the rewards, the methods beside GRPO and what
    each keeps in memory, and the departures from the chapter."""
    run, main = results.get("run") or {}, (results.get("train") or {}).get("variant") or "grpo"
    adapter = (run.get("model") or {}).get("adapter")
    device = device_words(run)
    rewards = ((results.get("runs") or {}).get(main) or {}).get("settings", {}).get("rewards")
    rows = trained_rows(results)
    others = [r["method"] for r in rows if r.get("model") != main]
    text = (f"{model_words(run)}, with the SFT adapter {adapter or 'not recorded'}, trained further"
            f"{f' on {device}' if device else ''} with GRPO on rewards computed by code ({reward_words(rewards)})")
    text += f"; beside it, from the same adapter, {join_words(others)}." if others else "."
    memory = memory_words(rows)
    if memory:
        text += f" In memory: {memory}."
    departures = departures_words(run)
    text = f"{text} {departures}" if departures else text
    return text[0].upper() + text[1:]


def report_words(results: dict) -> dict:
    """The run-dependent words of the run card and the comparison, by the place they fill."""
    run, rows = results.get("run") or {}, trained_rows(results)
    return {"device": device_text(run), "model": model_words(run), "memory": memory_words(rows),
            "supervision": supervision_words(rows), "sampling": sampling_words(rows),
            "peak_memory": peak_memory_words(run), "departures": departures_words(run),
            "leakage": leakage_words(run), "methods": [row["method"] for row in rows]}
