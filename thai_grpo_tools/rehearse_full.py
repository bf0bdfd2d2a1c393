"""`make rehearse-full` (CPU, preset cpu) and `make gpu-check` (CUDA, preset chapter, one of ``GPU_CHECK_PASSES``):
Qwen3-0.6B at full size (the hub cache's real weights, else random ones) through every stage of the real config, one
optimizer step each: its seconds per step and its peak memory beside the memory plan's at exactly its sizes (on a CPU
each stage in a fresh process, its peak RSS above the imports; on CUDA torch.cuda.max_memory_reserved). Writes
OUT/rehearse.json and OUT/rehearse.md."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

from thai_grpo.jobs.devices import job_device
from thai_grpo.jobs.machine import this_cpu
from thai_grpo.workflow import deep_merge
from thai_grpo.jobs.memory_stages import CARD_GIB, CPU, T4, Precision
from thai_grpo_tools.memory_plan import (QWEN3_0_6B, REPO, grid, real_config, sized_config, sizes_for_card,
                                         stage_plans)

STEP = {"max_steps": 1, "save_steps": 1000}  # one optimizer step; no checkpoint written mid-run
PPO_CPU = {"batch_size": 4, "max_steps": 1, "num_ppo_epochs": 1, "num_mini_batches": 1}
PRESETS = {
    "cpu": {  # every stage in minutes on 2 cores
        "grpo": {"per_device_train_batch_size": 4, "num_generations": 4, "gradient_accumulation_steps": 1,
                 "max_completion_length": 16, **STEP},
        "reward_model": {"args": {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 1,
                                  "max_length": 512, **STEP}},
        "variants": {"dpo": {"dpo": {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 1, **STEP}},
                     "ppo": {"ppo": PPO_CPU}, "ppo_verifier": {"ppo": PPO_CPU}},
        "eval": {"num_samples": 2, "batch_size": 2, "max_new_tokens": 16, "ks": [1, 2]},
    },
    "chapter": {  # the chapter's sizes, one optimizer step per trainer
        "grpo": STEP, "reward_model": {"args": STEP},
        "variants": {"grpo": {"grpo": {"max_steps": 3}},  # float16's loss scale calibrates on its first steps
                     "dpo": {"dpo": STEP}, "ppo": {"ppo": {"max_steps": 1}},
                     "ppo_verifier": {"ppo": {"max_steps": 1}}},
    },
}
# A rehearsal records a lost update (training.max_lost_update_share) instead of stopping the stage at it.
RECORD_LOST_UPDATES = {"training": {"max_lost_update_share": 1.0, "report_to": "none"}}
# glibc maps every block of 64 KiB or more on its own and returns it when freed: RSS follows the live tensors.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}
# Each stage and the plan stages it is measured against (the largest of them).
STAGES = {"grpo": ("GRPO full: train step", "GRPO full: rollouts"),
          "grpo_fast": ("GRPO fast: train step", "GRPO fast: rollouts"),
          "rloo": ("GRPO full: train step", "GRPO full: rollouts"),
          "sample": ("held-out sampling",), "decode_stops": ("held-out sampling",), "cuda_graphs": ("held-out sampling",),
          "token_logprobs": ("token log-probs (k1 vs k3)",), "dpo": ("DPO (dpo): train step",),
          "reward_model": ("reward model: train step",), "ppo": ("PPO (ppo): rollouts", "PPO (ppo): update"),
          "ppo_verifier": ("PPO (ppo_verifier): rollouts", "PPO (ppo_verifier): update")}
ORDER = tuple(STAGES)  # the order the stages run in
TRAINERS = ("grpo", "grpo_fast", "rloo", "dpo", "ppo", "ppo_verifier")
TRAINING_STAGES = ("grpo", "grpo_fast", "rloo", "dpo", "reward_model", "ppo", "ppo_verifier")
GPU_STAGES = (*TRAINING_STAGES, "sample", "decode_stops", "token_logprobs")
CPU_STAGES = tuple(name for name in GPU_STAGES if name not in ("grpo_fast", "decode_stops"))
# make gpu-check's passes: name -> (dtype, the memory each stage may allocate in GiB or None, stages). Sampling and
# the token log-probs compute in float32 (eval.dtype) whatever the training dtype, so the bfloat16 pass only trains;
# within a T4's memory run the stages whose sizes the card decides and the trainers a T4 must hold, and the CUDA
# graphs' comparison (a T4's host is where they would pay most).
GPU_CHECK_PASSES = {"float16": ("float16", None, GPU_STAGES), "bfloat16": ("bfloat16", None, TRAINING_STAGES),
                    "auto": ("auto", None, GPU_STAGES),  # a card older than a T4: the dtype the pipeline picks
                    "float16-t4": ("float16", CARD_GIB, ("grpo", "dpo", "reward_model", "ppo", "sample",
                                                         "decode_stops", "cuda_graphs"))}


# ----------------------------------------------------------------------------------------- sizes and plans
def rehearsal_config(real: dict, preset: str, card_gib: float = CARD_GIB) -> dict:
    """The real config with a preset's sizes on top, ``auto`` as a card of ``card_gib`` chooses, lost updates kept."""
    if preset not in PRESETS:
        raise ValueError(f"preset {preset!r}: use one of {', '.join(PRESETS)}")
    config = deep_merge(deep_merge(real, PRESETS[preset]), RECORD_LOST_UPDATES)
    return sized_config(config, sizes_for_card(config, card_gib))


def problem_count(config: dict) -> tuple[int, int]:
    """(training rows: GRPO's prompts per generation batch or PPO's rollout batch, held-out rows: one generate call)."""
    grpo = config["grpo"]
    prompts = grpo["per_device_train_batch_size"] * grpo.get("gradient_accumulation_steps", 1) // grpo[
        "num_generations"]
    ppo = max(v.get("ppo", {}).get("batch_size", 0) for v in config["variants"].values())
    return max(prompts, ppo, 2), int(config["eval"]["batch_size"])


def device_precision(device: str, dtype: str) -> Precision:
    """The plan's precision for a rehearsal on ``device`` (``cpu``, or ``cuda`` with 16-bit frozen weights)."""
    return CPU if device == "cpu" else dataclasses.replace(T4, device=f"cuda ({dtype} weights and autocast)")


def plans(config: dict, precision: Precision, prompt: int, completions: int, card_gib: float = CARD_GIB) -> list[dict]:
    """The memory plan at exactly the rehearsal's sizes (the stand-in's LoRA, its prompt and completion counts)."""
    from thai_grpo.jobs.memory_plan import Lora
    from thai_grpo_tools.rehearsal import STANDIN_ADAPTER

    return stage_plans(config, QWEN3_0_6B, Lora.from_config(STANDIN_ADAPTER), precision=precision, prompt=prompt,
                       logprob_rows=min(32, completions), card_gib=card_gib)


def predicted_bytes(stage: str, stage_plan: list[dict]) -> int | None:
    """The plan's peak for a rehearsal stage: the largest of the plan stages it runs (None where none is planned)."""
    peaks = [plan["peak_bytes"] for plan in stage_plan if plan["stage"] in STAGES[stage]]
    return max(peaks) if peaks else None


def comparison(records: list[dict], stage_plan: list[dict]) -> list[dict]:
    """Each stage record with its prediction and measured / predicted; an ``auto`` size not the plan's is an error."""
    rows = []
    for record in records:
        predicted, measured = predicted_bytes(record["stage"], stage_plan), record.get("peak_bytes")
        sized = record.get("sized") or {}
        chosen = {key: value for key, value in sized.items() if key != "planned"}
        if chosen and list(chosen.values()) != [sized["planned"]] and "error" not in record:
            record = {**record, "error": f"sized {chosen} where the plan sized {sized['planned']}"}
        rows.append({**record, "predicted_bytes": predicted,
                     "ratio": round(measured / predicted, 2) if predicted and measured else None})
    return rows


def table(rows: list[dict], memory: str) -> str:
    """``comparison`` as markdown; where the records count them (``update_record``), the losses and lost updates."""
    def gib(value):
        return "-" if value is None else f"{value / 2 ** 30:.2f}"

    def updates(row):
        if "optimizer_steps_skipped" not in row:
            return "-"
        finite = {True: "finite", False: "NOT FINITE", None: "-"}[row.get("loss_finite")]
        redone = f", {row['scaler_redos']} redone" if row.get("scaler_redos") else ""
        return f"{finite}; {row['optimizer_steps_skipped']} skipped, {row['nonfinite_grad_steps']} non-finite{redone}"

    counted = any("optimizer_steps_skipped" in row for row in rows)
    return grid(["stage", "predicted GiB", f"measured GiB ({memory})", "measured / predicted", "s/step", "steps",
                 *(["loss; updates lost"] if counted else [])],
                [[row["stage"], gib(row["predicted_bytes"]), gib(row.get("peak_bytes")),
                  "-" if row["ratio"] is None else str(row["ratio"]),
                  "-" if row.get("seconds_per_step") is None else f"{row['seconds_per_step']:.1f}",
                  str(row.get("steps", "-")), *([updates(row)] if counted else [])] for row in rows])


# ----------------------------------------------------------------------------------------- the inputs
def cached_real_weights(config: dict, cache_dir: str | Path | None = None) -> dict | None:
    """The real base's and SFT adapter's snapshot folders where the local hub cache holds both, else None."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    from thai_grpo.core.hub import ALLOWED_FILES

    found = {}
    for key, section in (("base", "base"), ("adapter", "sft")):
        try:
            found[key] = snapshot_download(config[section]["name_or_path"], revision=config[section].get("revision"),
                                           allow_patterns=ALLOWED_FILES, local_files_only=True, cache_dir=cache_dir)
        except (LocalEntryNotFoundError, OSError, ValueError):
            return None
    if not all(any(Path(found[key]).glob("*.safetensors")) for key in found):
        return None
    return {**found, "weights": f"the real {config['base']['name_or_path']} and {config['sft']['name_or_path']} "
                                "from the hub cache"}


def answer_pairs(tokenizer, rows: list[dict], system_prompt: str, completion_tokens: int,
                 chat_template_kwargs: dict | None = None) -> list[dict]:
    """DPO's and the reward model's pairs (``preferences.build_pairs``' format), each answer after a think block
    filled to ``completion_tokens`` tokens, the budget the plan counts."""
    from thai_grpo.data.prompts import build_prompt, prompt_token_ids
    from thai_grpo.methods.preferences import token_fields

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    filler = ids("คิดทีละขั้น " * completion_tokens)

    def completion(number: int) -> str:
        tail = f"</think>\n{number}"
        return "<think>" + tokenizer.decode(filler[:max(completion_tokens - len(ids("<think>" + tail)), 1)]) + tail

    prompts = prompt_token_ids(tokenizer, [row["question"] for row in rows], system_prompt, chat_template_kwargs)
    pairs = []
    for row, prompt_ids in zip(rows, prompts):
        chosen, rejected = completion(row["answer"]), completion(row["answer"] + 1)
        pairs.append({"id": row["id"], "gold": row["answer"], "prompt": build_prompt(row["question"], system_prompt),
                      "chosen": [{"role": "assistant", "content": chosen}],
                      "rejected": [{"role": "assistant", "content": rejected}],
                      "chosen_reward": 1.5, "rejected_reward": 0.5,
                      **token_fields({"prompt_ids": prompt_ids, "completion_budget": completion_tokens},
                                     {"token_ids": ids(chosen)}, {"token_ids": ids(rejected)})})
    return pairs


def build(work: Path, preset: str, device: str) -> None:
    """The models, data and spec every stage reads (work/spec.json), sized as this device's card chooses."""
    from thai_grpo.core.io import write_jsonl
    from thai_grpo.data.prompts import chat_prompt_texts
    from thai_grpo.jobs.memory_stages import sizing_gib
    from thai_grpo.models.loading import load_tokenizer
    from thai_grpo_tools.rehearsal import full_size_standin, synthetic_rows

    real = real_config(REPO)
    card_gib = sizing_gib(device)  # the card's own memory, or its cap (a T4's on a CPU)
    config = rehearsal_config(real, preset, card_gib)
    auto = {"eval.batch_size": real["eval"].get("batch_size") == "auto",  # sized again by the stages' own code
            **{f"ppo.chunk_floats.{name}": variant.get("ppo", {}).get("chunk_floats") == "auto"
               for name, variant in real["variants"].items()}}
    train, held = problem_count(config)
    rows = synthetic_rows(train + held)
    system, ev = config["data"]["system_prompt"], config["eval"]
    paths = cached_real_weights(real) or full_size_standin(work / "standin", rows, system)
    tokenizer = load_tokenizer(paths["base"])
    texts = chat_prompt_texts(tokenizer, [r["question"] for r in rows], system, ev.get("chat_template_kwargs") or {})
    prompt = max(len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in texts)
    completion = int(ev.get("max_new_tokens") or config["grpo"]["max_completion_length"])
    config["variants"]["dpo"].setdefault("dpo", {})["max_length"] = prompt + completion  # rows as long as planned
    write_jsonl(work / "rows.jsonl", rows[:train])
    write_jsonl(work / "heldout.jsonl", rows[train:])
    write_jsonl(work / "pairs.jsonl", answer_pairs(tokenizer, rows[:train], system, completion,
                                                   ev.get("chat_template_kwargs")))
    spec = {**paths, "config": config, "prompt_tokens": prompt, "rows": str(work / "rows.jsonl"),
            "heldout": str(work / "heldout.jsonl"), "pairs": str(work / "pairs.jsonl"), "preset": preset,
            "card_gib": round(card_gib, 2), "auto": auto}
    (work / "spec.json").write_text(json.dumps(spec, ensure_ascii=False, indent=1), encoding="utf-8")


# ----------------------------------------------------------------------------------------- in a stage's process
def rss(field: str) -> int:
    """A field of /proc/self/status in bytes: VmRSS (resident now), VmHWM (its peak since the last reset)."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


class Meter:
    """Peak memory and wall time of a stage's run (from ``start`` to ``stop``)."""

    def __init__(self, device: str):
        self.device, self.baseline, self.t0, self.record = device, rss("VmRSS"), None, {}

    def start(self) -> None:
        if self.t0 is not None:
            return
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self.record["load_peak_bytes"] = rss("VmHWM") - self.baseline
        Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
        self.t0 = time.perf_counter()

    def stop(self, steps: int) -> dict:
        import torch

        if self.device == "cuda":  # what the allocator held (the card's memory the plan must cover), and its tensors
            torch.cuda.synchronize()
            self.record["allocated_bytes"] = torch.cuda.max_memory_allocated()
        seconds = time.perf_counter() - self.t0
        peak = torch.cuda.max_memory_reserved() if self.device == "cuda" else rss("VmHWM") - self.baseline
        return {**self.record, "peak_bytes": peak, "seconds": round(seconds, 2), "steps": steps,
                "seconds_per_step": seconds / max(steps, 1)}


def start_on_first_call(owner, name: str, meter: Meter):
    """While open, ``owner.name`` starts the meter when first called, and otherwise does what it did."""
    original = getattr(owner, name)
    return mock.patch.object(owner, name, lambda *args, **kwargs: meter.start() or original(*args, **kwargs))


def update_record(result: dict) -> dict:
    """A training result's loss finite at every step, and its counts of lost and redone updates."""
    from thai_grpo.core.io import UPDATE_COUNTS as COUNTS

    losses = [step[key] for step in result.get("steps", []) for key in ("loss", "policy_loss") if key in step]
    return {"loss_finite": all(math.isfinite(value) for value in losses) if losses else None,
            **{key: result[key] for key in COUNTS if key in result}}


def run_stages(names: list[str], work: Path, device: str) -> None:
    """Stages one after another in this process, each record in work/records/<stage>.json (an error kept as such)."""
    import gc
    import traceback

    import peft  # noqa: F401 - imported before any baseline: their code is not a stage's memory
    import torch
    import transformers
    import trl  # noqa: F401

    from thai_grpo.jobs.memory_stages import note_free_memory

    (work / "records").mkdir(parents=True, exist_ok=True)
    for name in names:
        try:
            note_free_memory(device)  # as a job notes it before loading anything: its auto sizes read it
            meter = Meter(device)
            with start_on_first_call(transformers.Trainer, "train", meter):
                record = {"stage": name, **run_measured(name, work, meter)}
        except Exception as error:  # noqa: BLE001 - one stage's failure is its record; the others still run
            traceback.print_exc()
            record = {"stage": name, "error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}
        (work / "records" / f"{name}.json").write_text(json.dumps(record), encoding="utf-8")
        print(f"rehearse_full: {name}: {record.get('error') or 'done'}", flush=True)
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()


def run_measured(name: str, work: Path, meter: Meter) -> dict:
    """What a stage runs, ``meter`` started where its own work begins."""
    from thai_grpo.core.io import read_jsonl, write_jsonl
    from thai_grpo.methods import RunSpec, train_variant
    from thai_grpo.workflow import eval_settings, variant_plan

    spec = json.loads((work / "spec.json").read_text(encoding="utf-8"))
    config, base, sft = spec["config"], spec["base"], spec["adapter"]
    rows, heldout, pairs = read_jsonl(spec["rows"]), read_jsonl(spec["heldout"]), read_jsonl(spec["pairs"])
    system, ev = config["data"]["system_prompt"], eval_settings(config)  # max_new_tokens as the pipeline fills it
    out, grpo_adapter = work / "outputs" / name, work / "outputs" / "grpo" / "adapter"
    policy = str(grpo_adapter) if grpo_adapter.is_dir() else sft
    if name in TRAINERS:
        import thai_grpo.methods.ppo as ppo

        plan = variant_plan(config, name)
        planned = plan["ppo"].get("chunk_floats")
        if spec["auto"].get(f"ppo.chunk_floats.{name}"):
            plan = {**plan, "ppo": {**plan["ppo"], "chunk_floats": "auto"}}  # sized by the job's own code
        reward = work / "outputs" / "reward_model" / "model"
        chosen, pass_rows = [], ppo.pass_rows
        with start_on_first_call(ppo, "_rollout", meter), mock.patch.object(  # the rows the job sized
                ppo, "pass_rows", lambda *args: chosen.append(pass_rows(*args)) or chosen[-1]):
            result = train_variant(RunSpec(
                run=name, plan=plan, base_dir=Path(base), adapter_dir=Path(sft), train_rows=rows, system_prompt=system,
                out_dir=out / "adapter", checkpoint_dir=work / "checkpoints" / name, seed=config["seed"],
                training=config["training"], pairs=pairs, reward_dir=reward if reward.is_dir() else None))
        recorded = result.get("args", {}).get("chunk_floats")
        sized = {"sized": {"chunk_floats": recorded, "planned": planned}} \
            if planned is not None and recorded != "auto" else {}  # auto: each pass sized by the card (pass_rows)
        return {**meter.stop(len(result["steps"]) or 1), **update_record(result), **sized,
                **({"pass_rows": chosen[-1]} if chosen else {})}
    if name == "reward_model":
        from thai_grpo.methods.reward_model import train_reward_model

        rm = config["reward_model"]
        result = train_reward_model(base, pairs, rm["args"], rm.get("lora"), out / "model", work / "checkpoints" / name,
                                    config["seed"], ev.get("chat_template_kwargs"), config["training"])
        return {**meter.stop(len(result["steps"]) or 1), **update_record(result)}
    batches = math.ceil(len(heldout) / ev["batch_size"])
    if name == "sample":
        from thai_grpo.jobs.memory_stages import sampling_sizes
        from thai_grpo.models.sampling import sample_heldout

        requested = "auto" if spec["auto"].get("eval.batch_size") else ev["batch_size"]
        batch = sampling_sizes(requested, base, ev["num_samples"], ev["max_new_tokens"], len(heldout),
                               job_device())["batch_size"]  # as the job sizes it: before its weights load
        model, tokenizer = evaluated(base, policy, ev)
        meter.start()
        records = sample_heldout(model, tokenizer, heldout, system, ev["num_samples"], ev["max_new_tokens"],
                                 ev["temperature"], batch, ev["seed"], ev.get("chat_template_kwargs"))
        write_jsonl(work / "outputs" / "samples.jsonl", records)
        return {**meter.stop(batches), "sized": {"batch_size": batch, "planned": ev["batch_size"]}}
    if name == "decode_stops":
        return decode_with_early_stops(base, policy, heldout, system, ev, meter)
    if name == "cuda_graphs":
        return graphs_against_eager(base, policy, heldout, system, ev, meter)
    if name == "token_logprobs":
        import thai_grpo.evaluation.token_logprobs as logprobs

        samples = read_jsonl(work / "outputs" / "samples.jsonl")
        with start_on_first_call(logprobs, "completion_log_softmax", meter):
            result = logprobs.policy_and_reference_logprobs(base, policy, sft, samples, system, 256,
                                                            chat_template_kwargs=ev.get("chat_template_kwargs"),
                                                            temperature=ev["temperature"])
        return meter.stop(math.ceil(result["num_completions"] / min(32, result["num_completions"])))
    raise ValueError(f"unknown stage {name!r}: use one of {', '.join(ORDER)}")


def evaluated(base: str, policy: str, ev: dict) -> tuple:
    """(the policy loaded for evaluation in ``eval.dtype`` on the job's device, its tokenizer)."""
    from thai_grpo.models.frozen import load_for_evaluation
    from thai_grpo.models.loading import load_tokenizer

    return load_for_evaluation(base, policy, dtype=ev.get("dtype", "float32")).to(job_device()), load_tokenizer(base)


def decode_with_early_stops(base: str, policy: str, heldout: list[dict], system: str, ev: dict, meter: Meter) -> dict:
    """One held-out call's decode loop, a third of the problems stopping after an eighth of the budget (as a real
    model's answers do, random weights' never), so the loop compacts its buffers while the other rows decode on."""
    import torch

    from thai_grpo.models.decoding import decode
    from thai_grpo.models.sampling import encode_prompts

    model, tokenizer = evaluated(base, policy, ev)
    problems, samples, budget = int(ev["batch_size"]), int(ev["num_samples"]), int(ev["max_new_tokens"])
    encoded = encode_prompts(tokenizer, [row["question"] for row in heldout[:problems]], system,
                             ev.get("chat_template_kwargs") or {}).to(model.device)
    stop, steps = tokenizer.eos_token_id, []
    stopping = (torch.arange(len(encoded["input_ids"]), device=model.device) % 3 == 0).repeat_interleave(samples)

    def choose(scores, rows, column):  # greedy, the stop token only where planned
        steps.append(1)
        chosen = scores.argmax(-1)
        chosen = chosen.masked_fill(chosen == stop, stop + 1)
        return torch.where(stopping[rows] & (column >= budget // 8), stop, chosen)

    meter.start()
    decode(model, encoded["input_ids"], encoded["attention_mask"], samples, budget, [stop], tokenizer.pad_token_id,
           choose)
    return {**meter.stop(1), "decode_steps": len(steps)}


def graphs_against_eager(base: str, policy: str, heldout: list[dict], system: str, ev: dict, meter: Meter) -> dict:
    """One held-out sampling call eager, then twice with CUDA graphs (``eval.cuda_graphs``; the first captures): each
    call's seconds and whether the graphed calls gave the eager tokens, what that key waits on."""
    import torch

    from thai_grpo.models.sampling import generate

    model, tokenizer = evaluated(base, policy, ev)
    rows = heldout[:int(ev["batch_size"])]

    def timed(graphs: bool) -> tuple[list, float]:
        begun = time.perf_counter()
        groups = generate(model, tokenizer, [row["question"] for row in rows], system, int(ev["num_samples"]),
                          int(ev["max_new_tokens"]), ev["temperature"], ev["seed"], ev.get("chat_template_kwargs"),
                          problem_keys=[row["id"] for row in rows], with_greedy=True, cuda_graphs=graphs)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return [[c["token_ids"] for c in group] for group in groups], round(time.perf_counter() - begun, 2)

    meter.start()
    (eager, eager_s), (captured, capture_s), (replayed, graphed_s) = timed(False), timed(True), timed(True)
    return {**meter.stop(3), "eager_s": eager_s, "graphed_first_s": capture_s, "graphed_s": graphed_s,
            "same_tokens": eager == captured == replayed}


# ----------------------------------------------------------------------------------------- the parent
def stage_env(device: str, dtype: str, threads: int | None) -> dict:
    """A stage's environment: offline, ``MALLOC_ENV``, ``threads`` (None: all), the jobs' CUDA allocator; float16 on
    CUDA acts as a T4 (capability 7.5)."""
    env = {**os.environ, **MALLOC_ENV, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTORCH_CUDA_ALLOC_CONF":
           "expandable_segments:True", **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    env.pop("THAI_GRPO_CAPABILITY", None)
    if device == "cuda" and dtype == "float16":
        env["THAI_GRPO_CAPABILITY"] = "7.5"
    return env


def machine(device: str) -> str:
    """The processor or GPU the numbers came from."""
    if device == "cuda":
        import torch

        return f"{torch.cuda.get_device_name(0)} ({os.cpu_count()} CPUs)"
    return f"{this_cpu()}, {len(os.sched_getaffinity(0))} cores"


def run_groups(stages: list[str], me: list[str], work: Path, env: dict, device: str, timeout: int) -> list[dict]:
    """Every stage's record: on a CPU a fresh process per stage (its RSS is the stage's alone), on CUDA one process."""
    ordered = sorted(stages, key=ORDER.index)
    records = []
    for group in [ordered] if device == "cuda" else [[name] for name in ordered]:
        for name in group:
            (work / "records" / f"{name}.json").unlink(missing_ok=True)
        begun = time.perf_counter()
        try:
            done = subprocess.run([*me, "--_stages", ",".join(group)], env=env, cwd=REPO, timeout=timeout * len(group),
                                  capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            done = None
        wall = round(time.perf_counter() - begun, 1)
        for name in group:
            path = work / "records" / f"{name}.json"
            if path.is_file():
                records.append({**json.loads(path.read_text()), "wall_s": wall})
            else:
                reason = "timed out" if done is None else (done.stderr.strip().splitlines() or ["no output"])[-1]
                records.append({"stage": name, "wall_s": wall, "error": reason})
            print(f"rehearse_full: {name}: {records[-1].get('error') or 'done'} ({wall} s)", flush=True)
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--preset", choices=tuple(PRESETS), default="cpu")
    parser.add_argument("--dtype", choices=("auto", "float16", "bfloat16"), default="auto")
    parser.add_argument("--stages", nargs="+", choices=ORDER)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "rehearse_full")
    parser.add_argument("--work", type=Path, help="stand-ins and stage outputs (default OUT/work)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per stage")
    parser.add_argument("--cap-gib", type=float, help="CUDA: let each stage allocate only this much of the card "
                        "(14.75: a T4's), sizes chosen for it as the jobs choose them")
    parser.add_argument("--pass", dest="check_pass", choices=GPU_CHECK_PASSES,
                        help="one of make gpu-check's passes: its dtype, memory cap and stages")
    parser.add_argument("--threads", type=int, help="CPU threads per stage (default: every core; on a machine "
                        "others share, 1 avoids the threads waiting on each other)")
    parser.add_argument("--_stages", help=argparse.SUPPRESS)
    parser.add_argument("--_build", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.check_pass:
        options.dtype, options.cap_gib, stages = GPU_CHECK_PASSES[options.check_pass]
        options.stages = options.stages or list(stages)
    work = (options.work or options.out / "work").resolve()
    if options._build or options._stages:
        import torch

        if options.cap_gib and torch.cuda.is_available():  # the jobs' own code sizes auto for the cap
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, options.cap_gib * 2 ** 30 / total), 0)
        if options._build:
            build(work, options.preset, options.device)
            return 0
        if os.environ.get("OMP_NUM_THREADS"):
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        run_stages(options._stages.split(","), work, options.device)
        return 0

    stages = options.stages or list(GPU_STAGES if options.device == "cuda" else CPU_STAGES)
    env = stage_env(options.device, options.dtype, options.threads)
    work.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, "-m", "thai_grpo_tools.rehearse_full", "--device", options.device, "--preset",
          options.preset, "--work", str(work), *(["--cap-gib", str(options.cap_gib)] if options.cap_gib else [])]
    started = time.perf_counter()
    subprocess.run([*me, "--_build"], check=True, env=env, cwd=REPO)
    print(f"rehearse_full: stand-ins ready in {time.perf_counter() - started:.0f} s ({work / 'standin'})", flush=True)
    records = run_groups(stages, me, work, env, options.device, options.timeout)
    spec = json.loads((work / "spec.json").read_text(encoding="utf-8"))
    samples = work / "outputs" / "samples.jsonl"
    completions = sum(len(json.loads(line)["completions"]) for line in samples.open()) if samples.is_file() else 32
    precision = device_precision(options.device, options.dtype)
    stage_plan = plans(spec["config"], precision, spec["prompt_tokens"], completions, spec["card_gib"])
    rows = comparison(records, stage_plan)
    memory = "peak RSS above the imports" if options.device == "cpu" else "torch.cuda.max_memory_reserved"
    result = {"device": options.device, "preset": options.preset, "dtype": options.dtype, "precision": precision.device,
              "machine": machine(options.device), "threads": options.threads or os.cpu_count(),
              "weights": spec["weights"], "card_gib": spec["card_gib"], "memory": memory,
              "prompt_tokens": spec["prompt_tokens"], "stages": rows, "plan": stage_plan,
              "wall_s": round(time.perf_counter() - started, 1)}
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "rehearse.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    (options.out / "rehearse.md").write_text(table(rows, memory) + "\n", encoding="utf-8")
    print(table(rows, memory))
    print(f"rehearse_full: {result['wall_s']} s in all on {result['machine']} with {result['weights']}, sized for "
          f"{result['card_gib']} GiB; {options.out / 'rehearse.json'}")
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
