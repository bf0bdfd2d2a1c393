"""The real run's predicted wall time, stage by stage, on a T4 and on an H100-class GPU (docs/real-run.md's generated
table; maintainer tooling for `make docs`, not imported by any pipeline job).

Each stage's work is counted from the real config at the sizes each card chooses (``stage_plans.sizes_for_card``):
the tokens it generates (every row of a ``generate`` call runs to the call's last step, so sequences x steps, an upper
bound reached once one row of a call hits the budget), its decode steps (generate calls x max new tokens) and its
optimizer steps. Its time is

    decode steps x ``step_s``  +  token units x ``unit_s``  +  ``JOB_START_S``

where a token unit is one completion token through one forward pass (a forward-backward counts 3: the backward costs
about twice the forward; a decode step's token counts 1). ``step_s`` is what a decode step costs whatever its batch
(launching a 28-layer step is host-bound at these sizes), ``unit_s`` what grows with the batch.

Where the costs come from (``t4_costs``, ``h100_costs``):
- T4: fitted to the chapter's own two T4 figures, GRPO full mode ~18 min and fast mode ~10 min, with each mode's work
  counted from the config as above (GRPO: decode 1 + reference forward 1 + forward-backward 3 = 5 units per token).
  Two figures, two unknowns: an assumption that the model holds, not a measurement.
- H100-class: no published figure for this workload; ``unit_s`` is the T4's divided by the memory-bandwidth ratio of
  the two datasheets (T4 320 GB/s, H100 SXM 3.35 TB/s: 10.5x; the dense 16-bit tensor ratio, 65 vs 989 TFLOPS, is
  larger), ``step_s`` the T4's divided by ``HOST_SPEEDUP`` (assumed: a faster host and launch path, not measured).
- ``measured_seconds``: a `make gpu-check` record (``rehearse.json`` of the chapter preset, copied to
  ``docs/reference/gpu_check.json``) replaces the prediction of every training stage it timed on its card, as its
  seconds per step x the stage's steps (optimizer steps; for PPO, rollout batches, each with all its updates).
"""

from __future__ import annotations

import dataclasses
import math

CHAPTER_T4_MINUTES = {"full": 18.0, "fast": 10.0}  # the chapter's own T4 times of GRPO's two modes
T4_BANDWIDTH_GBS, H100_BANDWIDTH_GBS = 320.0, 3350.0  # NVIDIA T4 and H100 SXM datasheets
HOST_SPEEDUP = 4.0  # assumed: a decode step's host-side cost on an H100-class machine vs a T4's (Colab-class) host
JOB_START_S = 20.0  # assumed: a job's imports, CUDA start and model loading from a local disk
GRPO_UNITS = 1 + 1 + 3  # per completion token: decode, the reference's forward, the forward-backward
GOALS = {"H100-class": 30 * 60, "T4": 2 * 3600}  # the whole comparison within 30 min / 2 h
PPO_DECODE_GOAL = 2.0  # PPO's decode steps at most 2x GRPO's (on an 80 GB card)


@dataclasses.dataclass(frozen=True)
class Costs:
    card: str
    card_gib: float
    step_s: float
    unit_s: float
    source: str


@dataclasses.dataclass(frozen=True)
class Work:
    """One stage's work: generated tokens, decode steps, optimizer steps, token units, jobs (model loads)."""
    stage: str
    generated_tokens: int
    decode_steps: int
    optimizer_steps: int
    units: int
    jobs: int = 1
    kind: str = ""  # the gpu-check stage whose measured seconds per step stand for it, if any
    measured_steps: int | None = None  # the steps that stage's seconds per step count, where not optimizer_steps

    @property
    def timed_steps(self) -> int:
        return self.optimizer_steps if self.measured_steps is None else self.measured_steps


def seconds(work: Work, costs: Costs) -> float:
    return work.decode_steps * costs.step_s + work.units * costs.unit_s + work.jobs * JOB_START_S


# ----------------------------------------------------------------------------------------- work per stage
def grpo_work(stage: str, args: dict, problems: int) -> Work:
    """A GRPO/RLOO run of one epoch: TRL generates batch x accumulation completions per call, one call per step."""
    g, length = int(args["num_generations"]), int(args["max_completion_length"])
    per_call = int(args["per_device_train_batch_size"]) * int(args.get("gradient_accumulation_steps", 1))
    calls = math.ceil(problems * g / per_call)
    tokens = calls * per_call * length
    return Work(stage, tokens, calls * length, calls, GRPO_UNITS * tokens, kind="grpo")


def sampling_work(stage: str, problems: int, num_samples: int, length: int, batch: int, greedy: bool = True,
                  jobs: int = 1) -> Work:
    """``jobs`` sampling jobs of ``problems`` x ``num_samples`` at ``batch`` problems per call, plus (``greedy``) one
    greedy answer per problem, as many problems per call as fit in a sampling call's memory
    (``greedy_problems_per_call``)."""
    from thai_grpo.jobs.memory_stages import greedy_problems_per_call
    from thai_grpo_tools.stage_plans import QWEN3_0_6B

    calls = math.ceil(problems / batch)
    sequences = problems * num_samples
    if greedy:
        calls_greedy = math.ceil(problems / greedy_problems_per_call(QWEN3_0_6B, batch, num_samples, length))
        calls, sequences = calls + calls_greedy, sequences + problems
    tokens = jobs * sequences * length
    return Work(stage, tokens, jobs * calls * length, 0, tokens, jobs)


def ppo_work(stage: str, settings: dict, length: int, generate_rows: int) -> Work:
    """PPO: per step ``batch`` rollouts in calls of ``generate_rows``, four scoring forwards (policy, reference, value,
    reward model), then ``num_ppo_epochs`` passes of policy and value forward-backward."""
    steps, batch = int(settings["max_steps"]), int(settings["batch_size"])
    tokens = steps * batch * length
    units = tokens * (1 + 4 + int(settings.get("num_ppo_epochs", 4)) * 2 * 3)
    updates = steps * int(settings.get("num_ppo_epochs", 4)) * int(settings.get("num_mini_batches", 1))
    # a gpu-check step of PPO is one rollout batch with all its epochs and minibatches (the rehearsal's max_steps: 1)
    return Work(stage, tokens, steps * math.ceil(batch / generate_rows) * length, updates, units, kind="ppo",
                measured_steps=steps)


def pair_training_work(stage: str, pairs: int, length: int, batch: int, units_per_token: int, kind: str) -> Work:
    """A pass over ``pairs`` preference pairs (chosen and rejected, ``length`` completion tokens each)."""
    return Work(stage, 0, 0, math.ceil(pairs / batch), units_per_token * 2 * pairs * length, kind=kind)


def real_run_work(config: dict, sizes: dict) -> list[Work]:
    """Every stage of the real comparison (rule all) at a card's ``sizes``, then pass@k (its own target)."""
    from thai_grpo.core.config import eval_settings, passk_settings
    from thai_grpo.jobs.memory_plan import generation_floats, rows_per_chunk
    from thai_grpo_tools.stage_plans import QWEN3_0_6B
    from thai_grpo.jobs.memory_stages import PROMPT_TOKENS, sampling_batch_for_card

    grpo, variants, ev = config["grpo"], config.get("variants", {}), eval_settings(config)
    models, problems, heldout = config["eval"]["models"], int(config["data"]["train_size"]), int(
        config["data"]["heldout_size"])
    length, n = int(ev["max_new_tokens"]), int(ev["num_samples"])
    work = []
    for name in models:
        method = variants.get(name, {}).get("method", "grpo")
        if name in variants and method in ("grpo", "rloo"):
            args = {**grpo, **variants[name].get("grpo", {})}
            work.append(grpo_work(f"train {name}", args, problems))
    if any(variants.get(m, {}).get("method") in ("dpo", "ppo") for m in models):
        g = int(grpo["num_generations"])
        pair_batch = sampling_batch_for_card(QWEN3_0_6B, g, length, problems, sizes["card_gib"]) \
            if config["eval"]["batch_size"] == "auto" else int(config["eval"]["batch_size"])
        work.append(sampling_work("preference pairs", problems, g, int(grpo["max_completion_length"]), pair_batch,
                                  greedy=False))
        rm = config.get("reward_model", {}).get("args", {})
        work.append(pair_training_work("reward model", problems, length, int(rm.get("per_device_train_batch_size", 8)),
                                       3, "reward_model"))
    for name in models:
        spec = variants.get(name, {})
        if spec.get("method") == "dpo":
            dpo = spec.get("dpo", {})
            work.append(pair_training_work(f"train {name}", problems, length,
                                           int(dpo.get("per_device_train_batch_size", 8)), 3 + 1, "dpo"))
        if spec.get("method") == "ppo":
            settings = {**spec.get("ppo", {}), "chunk_floats": sizes["ppo.chunk_floats"][name]}
            rows = rows_per_chunk(generation_floats(QWEN3_0_6B, PROMPT_TOKENS, length), int(settings["batch_size"]),
                                  settings["chunk_floats"])
            work.append(ppo_work(f"train {name}", settings, length, rows))
    extra = len(config["eval"].get("extra_sets") or {})
    own = [m for m in models if variants.get(m, {}).get("method") == "ppo"
           and float(variants[m].get("ppo", {}).get("temperature", 0.7)) != float(ev["temperature"])]
    jobs = len(models) * (1 + extra) + len(own)  # each set (MGSM: 250 problems, counted as the main set's size)
    work.append(sampling_work("held-out sampling", heldout, n, length, sizes["eval.batch_size"], jobs=jobs))
    work.append(Work("token log-probs (k1 vs k3)", 0, 0, 0, 2 * 256 * length))
    passk = passk_settings(config)
    work.append(sampling_work("pass@k (its own target)", int(passk["problems"]), int(passk["num_samples"]), length,
                              sizes["passk.batch_size"], jobs=len(passk.get("models", ["base", "sft", "grpo"]))))
    return work


# ----------------------------------------------------------------------------------------- costs
def t4_costs(config: dict) -> Costs:
    """(step_s, unit_s) solving the chapter's two T4 figures for GRPO full (the ``grpo`` section) and fast
    (``variants.grpo_fast``) on the config's training problems."""
    problems = int(config["data"]["train_size"])
    modes = {"full": grpo_work("full", config["grpo"], problems),
             "fast": grpo_work("fast", {**config["grpo"], **config["variants"]["grpo_fast"].get("grpo", {})},
                               problems)}
    (a1, b1), (a2, b2) = ((modes[m].decode_steps, modes[m].units) for m in ("full", "fast"))
    t1, t2 = (CHAPTER_T4_MINUTES[m] * 60 - JOB_START_S for m in ("full", "fast"))
    determinant = a1 * b2 - a2 * b1
    step_s, unit_s = (t1 * b2 - t2 * b1) / determinant, (a1 * t2 - a2 * t1) / determinant
    return Costs("T4", 15.1, step_s, unit_s, "fitted to the chapter's T4 times of GRPO full (~18 min) and fast "
                 "(~10 min)")


def h100_costs(t4: Costs) -> Costs:
    return Costs("H100-class", 79.1, t4.step_s / HOST_SPEEDUP, t4.unit_s * T4_BANDWIDTH_GBS / H100_BANDWIDTH_GBS,
                 f"the T4's, per token / {H100_BANDWIDTH_GBS / T4_BANDWIDTH_GBS:.1f} (datasheet memory bandwidth), "
                 f"per decode step / {HOST_SPEEDUP:g} (assumed)")


def measured_seconds(record: dict | None) -> tuple[str | None, dict]:
    """(the card a `make gpu-check` record ran on, {stage: seconds per optimizer step}) of its training stages."""
    if not record:
        return None, {}
    card = "T4" if "T4" in str(record.get("machine", "")) else "H100-class"
    return card, {row["stage"]: row["seconds_per_step"] for row in record.get("stages", [])
                  if row.get("seconds_per_step") and row["stage"] in ("grpo", "dpo", "reward_model", "ppo")}


# ----------------------------------------------------------------------------------------- the table
def predictions(config: dict, gpu_check: dict | None = None) -> dict:
    """Per card: its sizes, each stage's work and predicted seconds (measured where a gpu-check record has it), the
    comparison's total (pass@k apart) and the goals' verdicts."""
    from thai_grpo_tools.stage_plans import sizes_for_card

    t4 = t4_costs(config)
    measured_card, measured = measured_seconds(gpu_check)
    out = {}
    for costs in (t4, h100_costs(t4)):
        sizes = {**sizes_for_card(config, costs.card_gib), "card_gib": costs.card_gib}
        rows = []
        for work in real_run_work(config, sizes):
            timed = measured.get(work.kind) if measured_card == costs.card else None
            rows.append({"work": work, "seconds": timed * work.timed_steps + JOB_START_S if timed else
                         seconds(work, costs), "measured": bool(timed)})
        total = sum(row["seconds"] for row in rows if not row["work"].stage.startswith("pass@k"))
        decode = {w.stage: w.decode_steps for w in (row["work"] for row in rows)}
        ratio = decode.get("train ppo", 0) / decode["train grpo"] if "train grpo" in decode else None
        out[costs.card] = {"costs": costs, "sizes": sizes, "rows": rows, "total_s": total,
                           "meets_time_goal": total <= GOALS[costs.card], "ppo_decode_ratio": ratio}
    return out


def minutes(value: float) -> str:
    return f"{value / 60:.0f}" if value >= 600 else f"{value / 60:.1f}"


def markdown_table(config: dict, gpu_check: dict | None = None) -> str:
    """Each stage's work and its predicted minutes on both cards, the sizes each card chose, the goals' verdicts."""
    cards = predictions(config, gpu_check)
    t4, h100 = cards["T4"], cards["H100-class"]
    lines = ["| stage | generated tokens | decode steps T4 / H100 | optimizer steps | T4 min | H100-class min |",
             "|---|---|---|---|---|---|"]
    for a, b in zip(t4["rows"], h100["rows"]):
        mark = lambda row: minutes(row["seconds"]) + (" (measured)" if row["measured"] else "")  # noqa: E731
        lines.append(f"| {a['work'].stage} | {a['work'].generated_tokens:,} | {a['work'].decode_steps:,} / "
                     f"{b['work'].decode_steps:,} | {a['work'].optimizer_steps or ''} | {mark(a)} | {mark(b)} |")
    lines.append(f"| **the comparison (without pass@k)** | | | | **{minutes(t4['total_s'])}** | "
                 f"**{minutes(h100['total_s'])}** |")
    notes = []
    for card in (t4, h100):
        costs, sizes = card["costs"], card["sizes"]
        goal = GOALS[costs.card] / 60
        notes.append(f"- {costs.card} ({costs.card_gib} GiB): {costs.step_s:.3f} s per decode step, "
                     f"{costs.unit_s * 1e6:.1f} us per token unit ({costs.source}); sizes eval.batch_size "
                     f"{sizes['eval.batch_size']}, passk.batch_size {sizes['passk.batch_size']}, ppo.chunk_floats "
                     f"2^{math.log2(sizes['ppo.chunk_floats']['ppo']):.0f}; PPO's decode steps "
                     f"{card['ppo_decode_ratio']:.1f}x GRPO's; the comparison within {goal:.0f} min: "
                     f"{'yes' if card['meets_time_goal'] else 'no'}")
    return "\n".join(lines) + "\n\n" + "\n".join(notes)
