"""The real run's time plan, checked against measurements (docs/real-run.md's generated tables, `make docs`), by
``thai_grpo_tools.time_model``'s costs: each stage's work counted as its code runs it, every completion at its full
budget (an upper bound for a real model); ``calibration``: those costs fitted on the work each `make gpu-check` stage
did and on the chapter's two T4 times of GRPO's stage; ``plan``: the real comparison at the sizes each card chooses,
prompts at the memory plan's 256 tokens, its total (pass@k apart) against the goals."""

from __future__ import annotations

import dataclasses
import math
import re

from thai_grpo.workflow import eval_settings, passk_settings
from thai_grpo.jobs.memory_plan import (CHUNK_FLOATS, Lora, Shape, generation_floats, logprob_pass_floats,
                                        ppo_update_floats, rows_per_chunk)
from thai_grpo.jobs.memory_stages import CARD_GIB, PROMPT_TOKENS, ppo_pass_rows, sampling_batch_for_card
from thai_grpo_tools.memory_plan import QWEN3_0_6B, sft_shape, sizes_for_card
from thai_grpo_tools.rehearse_full import GPU_CHECK_PASSES, rehearsal_config
from thai_grpo_tools.time_model import (A100, DECODE_LOOP, GRAPHED_LOOP, H100, H200, HF_GENERATE, KL_BYTES,
                                        KL_OPS_PER_COMPLETION, T4, TRL_GENERATE, Card, Sampler, Work, breakdown,
                                        chunk_sizes, fit, forward_pass, generate_call, sampling_job, seconds, total)

CHAPTER_T4_MINUTES = {"full": 18.0, "fast": 10.0}  # the chapter's own T4 times of GRPO's whole stage
GOALS_MIN = {"T4": 120, "H100-class": 30}  # the whole comparison, pass@k apart
PPO_DECODE_GOAL = 2.0  # PPO's decode steps at most twice GRPO's on an 80 GB card
CHECKED_ERROR = 0.25  # the calibration counts as checked when every measured stage is within this
PLAN_CARDS = (T4, A100, H100)
FUSED_HEAD_STAGES = ("grpo", "grpo_fast", "rloo", "dpo")  # the rehearsal's stages that run TRL's fused head


# ----------------------------------------------------------------------------------------- what each stage does
def training_ops(checkpointing: bool) -> str:
    return "train_lora_checkpointed" if checkpointing else "train_lora"


def grpo_step(shape: Shape, dtype: str, args: dict, prompt: int, method: str = "grpo") -> Work:
    """One optimizer step of TRL's GRPO or RLOO: batch x accumulation rollouts in one ``generate`` call through the
    LoRA policy, then per micro-batch the reference's forward pass (beta > 0; RLOO also the policy's own, its old
    log-probs) and a forward-backward, through TRL's fused head on the completion positions."""
    g, length = int(args["num_generations"]), int(args["max_completion_length"])
    batch, accumulation = int(args["per_device_train_batch_size"]), int(args.get("gradient_accumulation_steps", 1))
    checkpointing, width, rows = bool(args.get("activation_checkpointing")), prompt + length, batch * accumulation
    rollouts = generate_call(shape, dtype, TRL_GENERATE, rows // g, g, prompt, [length] * rows, "decode_lora")
    reference = forward_pass(shape, dtype, batch, width, length, "forward") if float(args.get("beta", 0)) else Work()
    old = forward_pass(shape, dtype, batch, width, length, "forward_lora") if method == "rloo" else Work()
    train = forward_pass(shape, dtype, batch, width, length, training_ops(checkpointing), "fused_train", train=True,
                         checkpointing=checkpointing)
    return rollouts + (reference + old + train) * accumulation


def grpo_job(shape: Shape, args: dict, problems: int, prompt: int, method: str = "grpo") -> Work:
    """A whole GRPO (or RLOO) job: one epoch of steps (problems x G completions, batch x accumulation a step)."""
    per_step = int(args["per_device_train_batch_size"]) * int(args.get("gradient_accumulation_steps", 1))
    steps = math.ceil(problems * int(args["num_generations"]) / per_step)
    return grpo_step(shape, "16-bit", args, prompt, method) * steps + Work(trainer_runs=1, fused_head_compiles=1,
                                                                           jobs=1)


def pair_step(shape: Shape, pairs: int, width: int, completion: int, checkpointing: bool, method: str) -> Work:
    """One step over ``pairs`` preference pairs (a chosen and a rejected row each): DPO (the reference's forward
    pass, then the policy's forward-backward through TRL's fused head) or the reward model (a score head)."""
    rows, ops = 2 * pairs, training_ops(checkpointing)
    if method == "reward_model":
        return forward_pass(shape, "16-bit", rows, width, 0, ops, "none", head="score", train=True,
                            checkpointing=checkpointing)
    return forward_pass(shape, "16-bit", rows, width, completion, "forward") + forward_pass(
        shape, "16-bit", rows, width, completion, ops, "fused_train", train=True, checkpointing=checkpointing)


def ppo_step(shape: Shape, settings: dict, prompt: int, length: int, chunks: dict, sampler: Sampler) -> Work:
    """One PPO step (thai_grpo.methods.ppo): ``batch_size`` rollouts in generate calls of ``chunks["generate"]``
    prompts; the policy's and the reference's (no LoRA) log-prob passes, full log-softmaxes, in chunks of
    ``chunks["logprobs"]`` rows; the value model's (and the reward model's) scores in chunks of ``chunks["value"]``;
    ``num_ppo_epochs`` x ``num_mini_batches`` updates, each a forward-backward of policy and value model in chunks of
    ``chunks["update"]`` rows, their activations checkpointed where ``chunks["checkpointing"]``."""
    batch, width, dtype = int(settings["batch_size"]), prompt + length, "16-bit"
    updates = int(settings.get("num_ppo_epochs", 4)) * int(settings.get("num_mini_batches", 1))
    checkpointing = bool(chunks.get("checkpointing"))
    rollouts = total(generate_call(shape, dtype, sampler, rows, 1, prompt, [length] * rows, "decode_lora")
                     for rows in chunk_sizes(batch, chunks["generate"]))

    def logprob_passes(ops: str) -> Work:
        return total(forward_pass(shape, dtype, rows, width, length + 1, ops, "full")
                     for rows in chunk_sizes(batch, chunks["logprobs"]))

    scorers = 1 if settings.get("score") == "verifier" else 2  # the value model, and the reward model
    scores = total(forward_pass(shape, dtype, rows, width, 0, "forward_lora", "none", head="score")
                   for rows in chunk_sizes(batch, chunks.get("value", batch))) * scorers
    ops = training_ops(checkpointing)
    update = total(forward_pass(shape, dtype, rows, width, length + 1, ops, "full_train", train=True,
                                checkpointing=checkpointing) +
                   forward_pass(shape, dtype, rows, width, 0, ops, "none", head="score", train=True,
                                checkpointing=checkpointing)
                   for rows in chunk_sizes(batch // int(settings.get("num_mini_batches", 1)), chunks["update"]))
    return rollouts + logprob_passes("forward_lora") + logprob_passes("forward") + scores + update * updates


def ppo_chunks(shape: Shape, settings: dict, prompt: int, length: int, sft: Lora, value: Lora,
               card_gib: float) -> dict:
    """The rows per chunk of each PPO pass and whether its update checkpoints, as the job chooses them on a CUDA card
    of ``card_gib`` GiB (``memory_stages.ppo_pass_rows``: within ``chunk_floats``, or for ``auto`` within the card)."""
    return ppo_pass_rows(shape, sft, value, settings, length, card_gib, prompt=prompt, may_checkpoint=True)


def token_logprobs_work(shape: Shape, completions: int, prompt: int, length: int, batch: int = 32) -> Work:
    """The k1-vs-k3 stage (thai_grpo.evaluation.token_logprobs), in float32: per chunk of completions the policy's
    and the reference's forward passes with full log-softmaxes, then each completion's exact KL in float64."""
    width = prompt + length
    rows = rows_per_chunk(logprob_pass_floats(shape, width), batch, CHUNK_FLOATS)
    passes = total(forward_pass(shape, "float32", size, width, length + 1, "forward_lora", "full32")
                   for size in chunk_sizes(completions, rows))
    return passes * 2 + Work(bytes=completions * length * shape.vocab_size * KL_BYTES,
                             ops=completions * KL_OPS_PER_COMPLETION)


# ----------------------------------------------------------------------------------------- the measured stages
def record_sizes(record: dict) -> dict:
    """The sizes a `make gpu-check` record's stages ran with, as its own memory plan states them: held-out problems
    per generate call and samples of each; PPO's rows per generate call, log-prob pass and update chunk."""
    notes = {plan["stage"]: plan["note"] for plan in record["plan"]}
    problems, samples = re.search(r"(\d+) problems x (\d+) samples", notes["held-out sampling"]).groups()
    generate, logprobs = re.search(r"generated (\d+) at a time, log-prob passes of (\d+) rows",
                                   notes["PPO (ppo): rollouts"]).groups()
    update = re.search(r"chunks of (\d+)", notes["PPO (ppo): update"]).group(1)
    return {"heldout_problems": int(problems), "samples": int(samples),
            "ppo": {"generate": int(generate), "logprobs": int(logprobs), "update": int(update)}}


def rehearsal_stage_work(stage: str, config: dict, prompt: int, sizes: dict, shape: Shape) -> Work:
    """What one stage of ``rehearse_full`` ran between its meter's start and stop, with the records' code."""
    grpo, variants, length = config["grpo"], config["variants"], int(config["grpo"]["max_completion_length"])
    if stage in ("grpo", "grpo_fast", "rloo"):
        args = {**grpo, **variants.get(stage, {}).get("grpo", {})}
        return grpo_step(shape, "16-bit", args, prompt, "rloo" if stage == "rloo" else "grpo") + Work(trainer_runs=1)
    if stage in ("reward_model", "dpo"):
        args = config["reward_model"]["args"] if stage == "reward_model" else {**grpo, **variants["dpo"]["dpo"]}
        width = prompt + length + (stage == "reward_model")
        return pair_step(shape, int(args["per_device_train_batch_size"]), width, length,
                         bool(args.get("activation_checkpointing")), stage) + Work(trainer_runs=1)
    if stage in ("ppo", "ppo_verifier"):
        return ppo_step(shape, variants[stage]["ppo"], prompt, length, sizes["ppo"], HF_GENERATE) + Work(trainer_runs=1)
    problems, samples = sizes["heldout_problems"], sizes["samples"]
    if stage == "sample":
        return sampling_job(shape, "float32", HF_GENERATE, problems, samples, problems, prompt, length, greedy=True)
    if stage == "token_logprobs":
        return token_logprobs_work(shape, problems * samples, prompt, length)
    raise ValueError(f"no work model for the rehearsal's stage {stage!r}")


def trainer_steps(stage: str, config: dict) -> int:
    """The optimizer steps a GRPO-family stage of ``rehearse_full`` makes under ``config`` (its variant's
    ``max_steps``; ``rehearsal_stage_work`` counts one); 1 for any other stage."""
    if stage not in ("grpo", "grpo_fast", "rloo"):
        return 1
    return int({**config["grpo"], **config["variants"].get(stage, {}).get("grpo", {})}["max_steps"])


def card_of(machine: str) -> Card:
    for card in (H200, H100, A100, T4):
        if card.name.split()[0] in machine:
            return card
    raise ValueError(f"no datasheet for {machine!r}: add its Card to thai_grpo_tools.time_model")


def measured_stages(records: list[dict], real: dict, shape: Shape) -> list[dict]:
    """Every timed stage of the `make gpu-check` records with its work and its position in its process (the stages
    of a record ran in one process, in its order); the first stage there that runs TRL's fused head compiles it."""
    rows = []
    for record in records:
        config = rehearsal_config(real, record.get("preset", "chapter"), record.get("card_gib", CARD_GIB))
        sizes, compiled = record_sizes(record), False
        for position, stage in enumerate(record["stages"], 1):  # in the order they ran
            if stage.get("seconds") is None or stage["stage"] == "cuda_graphs":  # a comparison, not a calibration
                continue
            compiles = stage["stage"] in FUSED_HEAD_STAGES and not compiled
            compiled = compiled or compiles
            work = rehearsal_stage_work(stage["stage"], config, int(record["prompt_tokens"]), sizes, shape)
            if stage["stage"] in ("grpo", "grpo_fast", "rloo"):
                work = work * int(stage.get("steps") or 1)  # the steps the record's stage made (one step's work above)
            rows.append({"stage": stage["stage"], "dtype": record["dtype"], "card": card_of(record["machine"]),
                         "position": position, "measured_s": float(stage["seconds"]),
                         "work": work + Work(fused_head_compiles=compiles)})
    return rows


def chapter_stages(real: dict, shape: Shape, prompt: int) -> list[dict]:
    """The chapter's two T4 figures: GRPO's whole stage in full and fast mode."""
    return [{"stage": f"GRPO {mode} mode, whole stage (the chapter)", "dtype": "float16", "card": T4,
             "measured_s": CHAPTER_T4_MINUTES[mode] * 60,
             "work": grpo_job(shape, {**real["grpo"], **real["variants"][variant].get("grpo", {})},
                              int(real["data"]["train_size"]), prompt)}
            for mode, variant in (("full", "grpo"), ("fast", "grpo_fast"))]


def calibration(records: list[dict], real: dict, shape: Shape, prompt: int) -> dict:
    """The fitted costs and, for every measured stage, its predicted seconds and relative error."""
    measured, chapter = measured_stages(records, real, shape), chapter_stages(real, shape, prompt)
    costs = fit(measured, chapter)
    rows = [{**row, "predicted_s": seconds(row["work"], row["card"], costs)} for row in measured + chapter]
    rows = [{**row, "error": row["predicted_s"] / row["measured_s"] - 1} for row in rows]
    return {"costs": costs, "rows": rows, "largest_error": max(abs(row["error"]) for row in rows)}


def gpu_check_seconds(real: dict, costs, card: Card, prompt: int, passes: tuple[str, ...]) -> dict:
    """What `make gpu-check` takes on ``card`` by the fitted costs: each pass of ``passes``
    (``rehearse_full.GPU_CHECK_PASSES``) with its stages at the sizes its card (or memory cap) chooses, GRPO's steps
    counted; decode_stops as one held-out batch (its rows stop early, so less), cuda_graphs as three. Stand-in
    building, process start-up and vLLM are left out."""
    out = {}
    for name in passes:
        _, cap, stages = GPU_CHECK_PASSES[name]
        config = rehearsal_config(real, "chapter", cap or card.memory_gib)
        length = int(config["grpo"]["max_completion_length"])
        sft, value = sft_shape(config, None)
        chunks = ppo_chunks(QWEN3_0_6B, {**config["variants"]["ppo"]["ppo"], **real["variants"]["ppo"].get("ppo", {})},
                            prompt, length, sft, value, cap or card.memory_gib)
        sizes = {"heldout_problems": int(config["eval"]["batch_size"]), "samples": int(config["eval"]["num_samples"]),
                 "ppo": chunks}
        out[name] = {stage: seconds(rehearsal_stage_work(
            "sample" if stage in ("decode_stops", "cuda_graphs") else stage, config, prompt, sizes, QWEN3_0_6B)
            * trainer_steps(stage, config) * (3 if stage == "cuda_graphs" else 1), card, costs) for stage in stages}
    return out


# ----------------------------------------------------------------------------------------- the plan
def card_sizes(config: dict, card: Card) -> dict:
    """The sizes a card chooses for ``auto`` (``stage_plans.sizes_for_card``), with the preference pairs' batch
    (sampled as the held-out sets are, G samples per training problem)."""
    grpo, requested = config["grpo"], config["eval"].get("batch_size", "auto")
    pairs = int(requested) if requested != "auto" else sampling_batch_for_card(
        QWEN3_0_6B, int(grpo["num_generations"]), int(grpo["max_completion_length"]), int(config["data"]["train_size"]),
        card.memory_gib)
    return {**sizes_for_card(config, card.memory_gib), "pairs.batch_size": pairs, "card_gib": card.memory_gib}


def plan_stages(config: dict, sizes: dict, sampler: Sampler, shape: Shape, prompt: int,
                heldout: Sampler | None = None) -> list[tuple[str, Work]]:
    """Every stage of the real comparison (rule all) at a card's ``sizes``, then pass@k (its own target), each with
    its jobs. ``sampler``: the held-out, pass@k and preference-pair sampler and PPO's rollouts (GRPO's are TRL's);
    ``heldout``: another for held-out sampling and pass@k alone (``GRAPHED_LOOP``: ``eval.cuda_graphs``)."""
    heldout = heldout or sampler
    grpo, variants, ev = config["grpo"], config.get("variants", {}), eval_settings(config)
    models, problems, length = config["eval"]["models"], int(config["data"]["train_size"]), int(ev["max_new_tokens"])
    method = {name: variants.get(name, {}).get("method", "grpo") for name in models}
    stages = [(f"train {name}", grpo_job(shape, {**grpo, **variants[name].get("grpo", {})}, problems, prompt,
                                         method[name]))
              for name in models if name in variants and method[name] in ("grpo", "rloo")]
    if any(m in ("dpo", "ppo") for m in method.values()):
        stages.append(("preference pairs", sampling_job(
            shape, "float32", sampler, problems, int(grpo["num_generations"]), sizes["pairs.batch_size"], prompt,
            int(grpo["max_completion_length"])) + Work(jobs=1)))
        rm = config["reward_model"]["args"]
        pairs = int(rm.get("per_device_train_batch_size", 8))
        stages.append(("reward model", pair_step(shape, pairs, prompt + length + 1, length, bool(
            rm.get("activation_checkpointing")), "reward_model") * math.ceil(problems / pairs) +
            Work(trainer_runs=1, jobs=1)))
    sft, value = sft_shape(config, None)
    for name in (m for m in models if method[m] == "dpo"):
        dpo = {**grpo, **variants[name].get("dpo", {})}
        pairs = int(dpo.get("per_device_train_batch_size", 8))
        stages.append((f"train {name}", pair_step(shape, pairs, prompt + length, length, bool(
            dpo.get("activation_checkpointing")), "dpo") * math.ceil(problems / pairs) +
            Work(trainer_runs=1, fused_head_compiles=1, jobs=1)))
    for name in (m for m in models if method[m] == "ppo"):
        settings = variants[name]["ppo"]  # chunk_floats as the config says it (auto: each pass sized by the card)
        chunks = ppo_chunks(shape, settings, prompt, length, sft, value, sizes["card_gib"])
        stages.append((f"train {name}", ppo_step(shape, settings, prompt, length, chunks, sampler) *
                       int(settings["max_steps"]) + Work(trainer_runs=1, jobs=1)))
    extra = len(config["eval"].get("extra_sets") or {})
    own = [m for m in models if method[m] == "ppo"
           and float(variants[m]["ppo"].get("temperature", 0.7)) != float(ev["temperature"])]
    jobs = len(models) * (1 + extra) + len(own)  # each extra set (MGSM: 250 problems) counted at the main set's size
    stages.append(("held-out sampling", sampling_job(
        shape, "float32", heldout, int(config["data"]["heldout_size"]), int(ev["num_samples"]),
        sizes["eval.batch_size"], prompt, length, greedy=True)
        * jobs + Work(jobs=jobs)))
    stages.append(("token log-probs (k1 vs k3)", token_logprobs_work(shape, 256, prompt, length) + Work(jobs=1)))
    passk = passk_settings(config)
    runs = len(passk.get("models", ["base", "sft", "grpo"]))
    stages.append(("pass@k (its own target)", sampling_job(
        shape, "float32", heldout, int(passk["problems"]), int(passk["num_samples"]), sizes["passk.batch_size"],
        prompt, length, greedy=True) * runs + Work(jobs=runs)))
    return stages


def plan(config: dict, costs, shape: Shape, prompt: int) -> dict:
    """Per card, as the code runs now (the decode loop): its sizes, each stage's work, seconds and cost terms, the
    comparison's total (pass@k apart), that total with ``eval.cuda_graphs`` (held-out sampling's steps replayed as
    CUDA graphs, ``GRAPHED_LOOP``) and the ratio of PPO's decode steps to GRPO's."""
    def comparison_s(stages: list) -> float:
        return sum(seconds(work, card, costs) for name, work in stages if not name.startswith("pass@k"))

    out = {}
    for card in PLAN_CARDS:
        sizes = card_sizes(config, card)
        planned = plan_stages(config, sizes, DECODE_LOOP, shape, prompt)
        stages = [{"stage": name, "work": work, "seconds": seconds(work, card, costs),
                   "terms": breakdown(work, card, costs)} for name, work in planned]
        steps = {s["stage"]: s["work"].decode_steps for s in stages}
        sft, value = sft_shape(config, None)
        ppo = ppo_chunks(shape, config["variants"]["ppo"]["ppo"], prompt, int(config["grpo"]["max_completion_length"]),
                         sft, value, card.memory_gib) if "ppo" in config.get("variants", {}) else None
        out[card.name] = {"card": card, "sizes": sizes, "stages": stages, "total_s": comparison_s(planned), "ppo": ppo,
                          "graphed_s": comparison_s(plan_stages(config, sizes, DECODE_LOOP, shape, prompt,
                                                                GRAPHED_LOOP)),
                          "ppo_decode_ratio": steps.get("train ppo", 0) / steps["train grpo"]}
    return out


# ----------------------------------------------------------------------------------------- the tables
def minutes(value: float) -> str:
    return f"{value / 60:.0f}" if value >= 600 else f"{value / 60:.1f}"


def calibration_table(result: dict) -> str:
    """Each measured stage, predicted beside measured, the fitted costs, and last the line ``largest error NN%``."""
    costs, rows = result["costs"], result["rows"]
    lines = ["| stage | card, dtype | stage of its process | measured s | predicted s | error |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {row['stage']} | {row['card'].name}, {row['dtype']} | {row.get('position', 'a job of its own')} | "
              f"{row['measured_s']:.1f} | {row['predicted_s']:.1f} | {row['error']:+.0%} |" for row in rows]
    server = H200.host
    lines += ["", f"Fitted: {1 / costs.memory:.0%} of the datasheet's bandwidth and {1 / costs.compute:.0%} of its "
              f"FLOP/s (bounded at 100%); per host op {costs.launch[server] * 1e6:.1f} us on the H200's server, "
              f"{costs.launch[T4.host] * 1e6:.1f} us on the chapter's T4 machine, and in a training pass "
              f"{costs.launch_train[server] * 1e6:.1f} and {costs.launch_train[T4.host] * 1e6:.1f} us; "
              f"{costs.trainer_run:.1f} s per trainer run, {costs.fused_head_compile:.1f} s per compile of TRL's fused "
              "head."]
    beyond = sorted((row for row in rows if abs(row["error"]) > CHECKED_ERROR), key=lambda row: -abs(row["error"]))
    missed = ", ".join(f"{row['stage']} ({row['error']:+.0%}, stage {row.get('position', '-')} of its process)"
                       for row in beyond)
    lines.append(f"Every stage within {CHECKED_ERROR:.0%}: "
                 + (f"no, not checked: {missed}." if beyond else "yes, the calibration is checked."))
    return "\n".join(lines + ["", f"largest error {round(result['largest_error'] * 100)}%"])


TERM_WORDS = {"host": "host launches", "memory": "GPU memory traffic (KV cache, weights, activations)",
              "compute": "compute", "one-offs": "job starts and one-offs"}


def holding_stage(run: dict) -> str:
    """The stage that holds a total, and why: its minutes, its jobs and decode steps, its largest cost term."""
    worst = max((s for s in run["stages"] if not s["stage"].startswith("pass@k")), key=lambda s: s["seconds"])
    term, value = max(worst["terms"].items(), key=lambda item: item[1])
    jobs, steps = worst["work"].jobs, worst["work"].decode_steps
    work = f"{jobs} jobs x {steps // jobs:,} decode steps" if steps and jobs > 1 else f"{steps:,} decode steps"
    return f"{worst['stage']} holds it ({minutes(worst['seconds'])} min: {work}, {TERM_WORDS[term]} " \
           f"{value / worst['seconds']:.0%})"


def ppo_rows(chunks: dict | None) -> str:
    """PPO's rows per chunk of each pass, and whether its update checkpoints."""
    if chunks is None:
        return "-"
    rows = " / ".join(f"{chunks[name]}" for name in ("generate", "logprobs", "value", "update"))
    return f"{rows} (generate / log-probs / value / update{', checkpointed' if chunks['checkpointing'] else ''})"


def plan_table(result: dict) -> str:
    """Each stage's decode steps and predicted minutes per card, the totals and the goals."""
    cards = list(result.values())
    names = [c["card"].name for c in cards]
    lines = [f"| stage | decode steps {' / '.join(names)} | " + " | ".join(f"{name} min" for name in names) + " |",
             "|---|---|" + "---|" * len(cards)]
    for index, stage in enumerate(cards[0]["stages"]):
        steps = " / ".join(f"{c['stages'][index]['work'].decode_steps:,}" for c in cards)
        cells = " | ".join(minutes(c["stages"][index]["seconds"]) for c in cards)
        lines.append(f"| {stage['stage']} | {steps} | {cells} |")
    totals = " | ".join(f"**{minutes(c['total_s'])}**" for c in cards)
    lines += [f"| **the comparison (without pass@k)** | | {totals} |", ""]
    for c in cards:
        card, sizes = c["card"], c["sizes"]
        line = (f"- {card.name} ({card.memory_gib} GiB, {card.bandwidth / 1e9:,.0f} GB/s, {card.flops_16 / 1e12:g} / "
                f"{card.flops_32 / 1e12:g} TFLOP/s in 16 / 32 bits): eval.batch_size {sizes['eval.batch_size']}, "
                f"passk.batch_size {sizes['passk.batch_size']}, PPO's rows per chunk {ppo_rows(c['ppo'])}; "
                "PPO's decode steps "
                f"{c['ppo_decode_ratio']:.1f}x GRPO's; with eval.cuda_graphs {minutes(c['graphed_s'])} min")
        if card.memory_gib >= 79:
            line += f" (at most {PPO_DECODE_GOAL:g}x: {'yes' if c['ppo_decode_ratio'] <= PPO_DECODE_GOAL else 'no'})"
        goal = GOALS_MIN.get(card.name)
        if goal:
            met = c["total_s"] <= goal * 60
            line += f"; within {goal} min: " + ("yes" if met else f"no, {holding_stage(c)}")
        lines.append(line)
    return "\n".join(lines)


def tables(real: dict, records: list[dict]) -> dict[str, str]:
    """The two generated tables of docs/real-run.md: ``time-check`` (the calibration) and ``time-plan``."""
    checked = calibration(records, real, QWEN3_0_6B, PROMPT_TOKENS)
    return {"time-check": calibration_table(checked),
            "time-plan": plan_table(plan(real, checked["costs"], QWEN3_0_6B, PROMPT_TOKENS))}
