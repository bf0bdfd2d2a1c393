"""The run's own words for the report, from results.json, so another run's report never repeats this one's claims."""

from __future__ import annotations

from thai_grpo.core.references import REFERENCE_NAMES
from thai_grpo.core.rewards import REWARD_WORDS
from thai_grpo.report.results import METHODS, VERIFIER

DEVICE_NAMES = {"cpu": "a CPU", "gpu": "a GPU", "cpu and gpu": "a CPU and a GPU"}
CHAPTER_REWARDS = ["correct", "format", "thai"]
PAIR_LABELS = (METHODS["ppo"][1], METHODS["dpo"][1])


def grpo_reference(config: dict | None) -> str:
    """``grpo.reference`` of a config (``sft`` when unset, the pipeline's default)."""
    return ((config or {}).get("grpo") or {}).get("reference", "sft")


def training_kl_name(config: dict | None) -> str:
    """What GRPO's and PPO's training KL is to, e.g. "the SFT policy"."""
    reference = grpo_reference(config)
    if reference not in REFERENCE_NAMES:
        raise ValueError(f"grpo.reference={reference!r}: use one of {', '.join(REFERENCE_NAMES)}")
    return REFERENCE_NAMES[reference]


def sft_kl_words(config: dict | None) -> str:
    """What the k1-vs-k3 stage's KL(GRPO || SFT) is, relative to the KL GRPO trained with."""
    if grpo_reference(config) == "sft":
        return "KL(GRPO || SFT): the KL TRL optimises against (grpo.reference: sft)"
    return (f"KL(GRPO || SFT), not the KL GRPO trained against: its reference is {training_kl_name(config)} "
            f"(grpo.reference: {grpo_reference(config)})")


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
    """Where the run trained: the run card's ``device``, else CPU for a ``+cpu`` torch build, else ``kind`` None."""
    recorded = run.get("device") or {}
    if recorded.get("kind"):
        return recorded
    torch = (run.get("versions") or {}).get("torch") or ""
    if torch.endswith("+cpu"):
        return {"kind": "cpu", "stages": {}, "source": f"torch {torch} is a CPU-only build"}
    return {"kind": None, "stages": {}, "source": "not recorded"}


def device_text(run: dict) -> str:
    """The run card's row: each device and precision with the stages that trained on it, and how it is known."""
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
    """What each method keeps in memory, grouped: 'PPO keeps 4 (...); DPO and GRPO keep 2 (...)'."""
    groups: dict[str, list[str]] = {}
    for row in rows:
        if row.get("models_in_memory"):
            groups.setdefault(row["models_in_memory"], []).append(row["method"])
    parts = [f"{join_words(names)} keep{'s' if len(names) == 1 else ''} {models}" for models, names in groups.items()]
    return "; ".join(parts) if parts else None


def supervision_lists(rows: list[dict]) -> dict[str, list[str]]:
    """The methods by supervision: ``pairs`` (preference pairs the verifier ranked) and ``verifier`` (no labels)."""
    return {"pairs": [row["method"] for row in rows if row.get("human_labels") in PAIR_LABELS],
            "verifier": [row["method"] for row in rows if row.get("human_labels") == VERIFIER]}


def sampling_lists(rows: list[dict]) -> dict[str, list[str]]:
    """Where each method's tokens come from: ``own`` (its training), ``dpo`` (SFT's pairs), ``ppo`` (its RM's pairs)."""
    dpo = [r["method"] for r in rows if r.get("human_labels") == METHODS["dpo"][1]]
    return {"own": [r["method"] for r in rows if r["method"] not in dpo], "dpo": dpo,
            "ppo": [r["method"] for r in rows if r.get("human_labels") == METHODS["ppo"][1]]}


def lead(results: dict) -> dict:
    """The facts of the page's first sentences (report/words.html.j2 ``lead``)."""
    run, main = results.get("run") or {}, (results.get("train") or {}).get("variant") or "grpo"
    rewards = ((results.get("runs") or {}).get(main) or {}).get("settings", {}).get("rewards")
    rows = trained_rows(results)
    return {"model": model_words(run), "adapter": (run.get("model") or {}).get("adapter"),
            "device": DEVICE_NAMES.get(device_of(run)["kind"]), "rewards": reward_words(rewards),
            "others": [r["method"] for r in rows if r.get("model") != main], "memory": memory_words(rows)}


def caveat(results: dict) -> dict | None:
    """The first screen's caveat: one training seed per method, on which problems; None without the run's config."""
    config = results.get("config") or {}
    data = config.get("data")
    if not data:
        return None
    sources = {"synthetic": "synthetic Thai word problems generated offline, not the chapter's GSM8K-Thai",
               "hub": f"{(data.get('hub') or {}).get('path', 'a hub dataset')} problems"}
    return {"seed": config.get("seed"), "data": sources.get(data["source"], "a local dataset's problems")}


def report_words(results: dict) -> dict:
    """The run-dependent words of the run card and the comparison, and the counts and cases words.html.j2 says."""
    run, rows = results.get("run") or {}, trained_rows(results)
    departures = run.get("chapter_departures")
    return {"device": device_text(run), "model": model_words(run), "memory": memory_words(rows),
            "supervision": supervision_lists(rows), "sampling": sampling_lists(rows),
            "device_kind": device_of(run)["kind"], "departures": None if departures is None else len(departures),
            "leakage": (run.get("data") or {}).get("leakage_check") or "text hash",
            "methods": [row["method"] for row in rows]}
