"""Qwen3-0.6B at full size (random weights, thai_grpo_tools.rehearsal_full) through every stage of the real config
for one optimizer step each, every stage in a fresh process; its peak memory beside the memory plan's prediction at
exactly those sizes, and its seconds per step. A benchmark, not a test.

    python tools/rehearse_full.py                       make rehearse-full: CPU, small rows and lengths
    python tools/rehearse_full.py --device cuda --preset chapter --pass float16
                                                          make gpu-check: the chapter's sizes on CUDA, forced float16
                                                          (a T4's path, THAI_GRPO_CAPABILITY=7.5); --pass bfloat16
                                                          on the GPU's own capability (8.0 or later), the trainers;
                                                          --pass float16-t4 within a T4's 14.75 GiB; --vllm adds
                                                          vLLM rollouts and sampling where vLLM imports

Peak memory: CPU, each stage in a fresh process, its peak RSS above its level after the imports, the peak reset
(/proc/self/clear_refs) when the stage's run begins, so model loading's transient copies are left out, as the plan
leaves them out; CUDA, torch.cuda.max_memory_reserved (what the allocator held: the card's memory the plan must
cover; expandable segments on) with max_memory_allocated beside it, from the same moment (the stages of one dtype share a process,
each one's models freed before the next: the imports are paid once). The run begins where the stage's own code does: a TRL trainer's
train(), PPO's first rollout, the first sampling or log-prob pass (hooks that only record the time and reset the
peak). Seconds per step: the run's wall time / its optimizer steps (sampling and log-probs: / their batches).
Writes OUT/rehearse.json and OUT/rehearse.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# glibc returns every freed tensor of 64 KiB or more to the system at once: RSS follows the live tensors
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}
ORDER = ("grpo", "grpo_fast", "rloo", "sample", "decode_stops", "token_logprobs", "dpo", "reward_model", "ppo",
         "ppo_verifier", "vllm_sample")


# ----------------------------------------------------------------------------------------- in a stage's process
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

        if self.device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - self.t0
        if self.device == "cuda":  # what the allocator held (the card's memory the plan must cover), and its tensors
            self.record["allocated_bytes"] = torch.cuda.max_memory_allocated()
            peak = torch.cuda.max_memory_reserved()
        else:
            peak = rss("VmHWM") - self.baseline
        return {**self.record, "peak_bytes": peak, "seconds": round(seconds, 2), "steps": steps,
                "seconds_per_step": seconds / max(steps, 1)}


def rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


@contextlib.contextmanager
def start_on_first_call(module, name: str, meter: Meter):
    """While open, ``module.name`` starts the meter when first called, and otherwise does what it did."""
    original = getattr(module, name)

    def wrapped(*args, **kwargs):
        meter.start()
        return original(*args, **kwargs)

    setattr(module, name, wrapped)
    try:
        yield
    finally:
        setattr(module, name, original)


def run_stages(names: list[str], work: Path, device: str) -> None:
    """Stages one after another in this process, each record in work/records/<stage>.json (an error kept as such:
    the next stage runs)."""
    import gc
    import traceback

    import peft  # noqa: F401 - imported before any baseline: their code is not a stage's memory
    import torch
    import transformers  # noqa: F401
    import trl  # noqa: F401

    (work / "records").mkdir(parents=True, exist_ok=True)
    for name in names:
        try:
            record = {"stage": name, **run_stage(name, work, device)}
        except Exception as error:  # noqa: BLE001 - one stage's failure is its record; the others still run
            traceback.print_exc()
            record = {"stage": name, "error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}
        (work / "records" / f"{name}.json").write_text(json.dumps(record), encoding="utf-8")
        print(f"rehearse_full: {name}: {record.get('error') or 'done'}", flush=True)
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()


def cap_memory(cap_gib: float | None) -> None:
    """On CUDA, let this process allocate only ``cap_gib`` of the card (a T4's 14.75 on a larger one), so that the jobs'
    own code sizes ``auto`` for it (``memory_stages.card_gib_of`` reads the cap) and a stage that outgrows it fails."""
    import torch

    if cap_gib and torch.cuda.is_available():
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_gib * 2 ** 30 / total), 0)


def run_stage(name: str, work: Path, device: str) -> dict:
    """One stage, in this process: returns its record. The card's free memory is noted first, as a job notes it
    before loading anything, so that the stage's own code sizes its ``auto`` passes from it."""
    import transformers

    from thai_grpo.jobs.memory_stages import note_free_memory

    note_free_memory(device)
    meter = Meter(device)
    with start_on_first_call(transformers.Trainer, "train", meter):
        return run_measured(name, work, meter)


def run_measured(name: str, work: Path, meter: Meter) -> dict:
    """What a stage runs, ``meter`` started where its own work begins."""
    from thai_grpo.workflow import eval_settings
    from thai_grpo.core.io import read_jsonl, write_jsonl
    from thai_grpo.methods import RunSpec, train_variant
    from thai_grpo.workflow import variant_plan
    from thai_grpo_tools.rehearsal_full import update_record

    spec = json.loads((work / "spec.json").read_text(encoding="utf-8"))
    config, base, sft = spec["config"], spec["base"], spec["adapter"]
    rows, heldout, pairs = read_jsonl(spec["rows"]), read_jsonl(spec["heldout"]), read_jsonl(spec["pairs"])
    system, ev = config["data"]["system_prompt"], eval_settings(config)  # max_new_tokens as the pipeline fills it
    out = work / "outputs" / name
    grpo_adapter = work / "outputs" / "grpo" / "adapter"
    policy = str(grpo_adapter) if grpo_adapter.is_dir() else sft
    if name in ("grpo", "grpo_fast", "rloo", "dpo", "ppo", "ppo_verifier"):
        plan = variant_plan(config, name)
        import thai_grpo.methods.ppo as ppo

        planned = plan["ppo"].get("chunk_floats")
        if spec["auto"].get(f"ppo.chunk_floats.{name}"):
            plan = {**plan, "ppo": {**plan["ppo"], "chunk_floats": "auto"}}  # sized by the job's own code
        reward = work / "outputs" / "reward_model" / "model"
        with start_on_first_call(ppo, "_rollout", meter):
            result = train_variant(RunSpec(
                run=name, plan=plan, base_dir=Path(base), adapter_dir=Path(sft), train_rows=rows, system_prompt=system,
                out_dir=out / "adapter", checkpoint_dir=work / "checkpoints" / name, seed=config["seed"],
                training=config["training"], pairs=pairs, reward_dir=reward if reward.is_dir() else None))
        chosen = result.get("args", {}).get("chunk_floats")
        sized = {"sized": {"chunk_floats": chosen, "planned": planned}} if planned is not None else {}
        return {**meter.stop(len(result["steps"]) or 1), **update_record(result), **sized}
    if name == "reward_model":
        from thai_grpo.methods.reward_model import train_reward_model

        rm = config["reward_model"]
        result = train_reward_model(base, pairs, rm["args"], rm.get("lora"), out / "model", work / "checkpoints" / name,
                                    config["seed"], ev.get("chat_template_kwargs"), config["training"])
        return {**meter.stop(len(result["steps"]) or 1), **update_record(result)}
    if name in ("sample", "vllm_sample"):
        batches = math.ceil(len(heldout) / ev["batch_size"])
        if name == "vllm_sample":
            from thai_grpo.evaluation.vllm_sampling import sample_heldout_vllm

            meter.start()
            records = sample_heldout_vllm(base, policy, heldout, system, ev, dtype=ev.get("dtype", "float32"))
            return {**meter.stop(batches), "peak_bytes": None}  # vLLM holds its own share of the GPU
        from thai_grpo.jobs.devices import job_device
        from thai_grpo.jobs.memory_stages import sampling_sizes
        from thai_grpo.models.loading import load_for_evaluation, load_tokenizer
        from thai_grpo.models.sampling import sample_heldout

        requested = "auto" if spec["auto"].get("eval.batch_size") else ev["batch_size"]
        batch = sampling_sizes(requested, base, ev["num_samples"], ev["max_new_tokens"], len(heldout),
                               job_device())["batch_size"]  # as the job sizes it: before its weights load
        model = load_for_evaluation(base, policy, dtype=ev.get("dtype", "float32"))  # the pipeline's eval precision
        model = model.to(job_device())
        meter.start()
        records = sample_heldout(model, load_tokenizer(base), heldout, system, ev["num_samples"], ev["max_new_tokens"],
                                 ev["temperature"], batch, ev["seed"], ev.get("chat_template_kwargs"))
        write_jsonl(work / "outputs" / "samples.jsonl", records)
        return {**meter.stop(batches), "sized": {"batch_size": batch, "planned": ev["batch_size"]}}
    if name == "decode_stops":
        return decode_with_early_stops(base, policy, heldout, system, ev, meter)
    if name == "token_logprobs":
        import thai_grpo.evaluation.token_logprobs as logprobs

        samples = read_jsonl(work / "outputs" / "samples.jsonl")
        with start_on_first_call(logprobs, "completion_log_softmax", meter):
            result = logprobs.policy_and_reference_logprobs(base, policy, sft, samples, system, 256,
                                                            chat_template_kwargs=ev.get("chat_template_kwargs"),
                                                            temperature=ev["temperature"])
        return meter.stop(math.ceil(result["num_completions"] / min(32, result["num_completions"])))
    raise ValueError(f"unknown stage {name!r}: use one of {', '.join(ORDER)}")


def decode_with_early_stops(base: str, policy: str, heldout: list[dict], system: str, ev: dict, meter: Meter) -> dict:
    """One held-out sampling call's decode loop whose rows stop early, as a real model's answers do (random weights
    never stop): every sample of a third of the problems stops after an eighth of the budget, so the loop compacts its
    cache while the other rows decode on (``decoding.SharedPromptCache.compact``)."""
    from thai_grpo.data.prompts import chat_prompt_texts
    from thai_grpo.jobs.devices import job_device
    from thai_grpo.models.decoding import COMPACT_WHEN_DONE, decode
    from thai_grpo.models.loading import load_for_evaluation, load_tokenizer

    tokenizer = load_tokenizer(base)
    model = load_for_evaluation(base, policy, dtype=ev.get("dtype", "float32")).to(job_device())
    problems, samples, budget = int(ev["batch_size"]), int(ev["num_samples"]), int(ev["max_new_tokens"])
    tokenizer.padding_side = "left"
    texts = chat_prompt_texts(tokenizer, [row["question"] for row in heldout[:problems]], system,
                              ev.get("chat_template_kwargs") or {})
    encoded = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    stop, steps = tokenizer.eos_token_id, []
    stopping = (encoded["input_ids"].new_tensor(range(len(texts))) % 3 == 0).repeat_interleave(samples)

    def choose(scores, rows):  # greedy, the stop token only where planned
        steps.append(1)
        chosen = scores.argmax(-1)
        chosen = chosen.masked_fill(chosen == stop, stop + 1)
        return chosen.masked_fill(stopping[rows], stop) if len(steps) > budget // 8 else chosen

    assert 1 / 3 >= COMPACT_WHEN_DONE, "a third of the prompts done must compact the cache"
    meter.start()
    decode(model, encoded["input_ids"], encoded["attention_mask"], samples, budget, [stop], tokenizer.pad_token_id,
           choose)
    return {**meter.stop(1), "decode_steps": len(steps)}


def build(work: Path, preset: str, device: str) -> None:
    """The models, data and spec every stage reads (work/spec.json), in this process: the real base and SFT adapter
    where the hub cache holds them, else stand-ins with random weights; sizes as this device's card chooses them."""
    from thai_grpo.core.io import write_jsonl
    from thai_grpo.models.loading import load_tokenizer
    from thai_grpo.jobs.memory_stages import sizing_gib
    from thai_grpo_tools.rehearsal_full import (answer_pairs, build_full_standin, cached_real_weights,
                                                 measured_prompt_tokens, problem_count, rehearsal_config,
                                                 training_rows)
    from thai_grpo_tools.stage_plans import merged_configs

    real = merged_configs([REPO / "config/config.yaml", REPO / "config/qwen3-0.6b.yaml"])
    card_gib = sizing_gib(device)  # the card's own memory, or its cap (a T4's on a CPU)
    config = rehearsal_config(real, preset, card_gib)
    auto = {"eval.batch_size": real["eval"].get("batch_size") == "auto",  # sized again by the stages' own code
            **{f"ppo.chunk_floats.{name}": variant.get("ppo", {}).get("chunk_floats") == "auto"
               for name, variant in real["variants"].items()}}
    train, held = problem_count(config)
    rows = training_rows(train + held)
    system, ev = config["data"]["system_prompt"], config["eval"]
    paths = cached_real_weights(real) or build_full_standin(work / "standin", rows, system)
    tokenizer = load_tokenizer(paths["base"])
    prompt = measured_prompt_tokens(tokenizer, rows, system, ev.get("chat_template_kwargs") or {})
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


# ----------------------------------------------------------------------------------------- the parent
def stage_env(device: str, dtype: str, threads: int | None) -> dict:
    """A stage's environment: glibc returning freed tensors, ``threads`` CPU threads (all cores when None), CUDA's
    allocator with expandable segments (as the pipeline's jobs: less fragmentation); on CUDA with float16 forced, a
    T4's capability."""
    env = {**os.environ, **MALLOC_ENV, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    env.pop("THAI_GRPO_CAPABILITY", None)
    if device == "cuda" and dtype == "float16":
        env["THAI_GRPO_CAPABILITY"] = "7.5"
    return env


def main() -> int:
    from thai_grpo_tools.rehearsal_full import (CPU_STAGES, GPU_CHECK_PASSES, GPU_STAGES, comparison,
                                                 device_precision, plans, table)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--preset", choices=("cpu", "chapter"), default="cpu")
    parser.add_argument("--dtype", choices=("auto", "float16", "bfloat16"), default="auto")
    parser.add_argument("--stages", nargs="+", choices=ORDER)
    parser.add_argument("--vllm", action="store_true", help="add the vLLM stages (CUDA, where vLLM imports)")
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
        cap_memory(options.cap_gib)
    if options._build:
        build(work, options.preset, options.device)
        return 0
    if options._stages:
        if os.environ.get("OMP_NUM_THREADS"):
            import torch

            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        run_stages(options._stages.split(","), work, options.device)
        return 0

    stages = options.stages or [*(GPU_STAGES if options.device == "cuda" else CPU_STAGES),
                                *(("vllm_sample",) if options.vllm else ())]
    env = stage_env(options.device, options.dtype, options.threads)
    work.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve()), "--device", options.device, "--preset", options.preset,
          "--work", str(work), *(["--cap-gib", str(options.cap_gib)] if options.cap_gib else [])]
    started = time.perf_counter()
    subprocess.run([*me, "--_build"], check=True, env=env, cwd=REPO)
    print(f"rehearse_full: stand-ins ready in {time.perf_counter() - started:.0f} s ({work / 'standin'})", flush=True)
    ordered = sorted(stages, key=ORDER.index)
    # CPU: a fresh process per stage (its RSS is the stage's alone); CUDA: one process, each stage's peak reset
    groups = [ordered] if options.device == "cuda" else [[name] for name in ordered]
    records = []
    for group in groups:
        for name in group:
            (work / "records" / f"{name}.json").unlink(missing_ok=True)
        begun = time.perf_counter()
        try:
            done = subprocess.run([*me, "--_stages", ",".join(group)], env=env, cwd=REPO,
                                  timeout=options.timeout * len(group), capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            done = None
        wall = round(time.perf_counter() - begun, 1)
        for name in group:
            record_path = work / "records" / f"{name}.json"
            if record_path.is_file():
                records.append({**json.loads(record_path.read_text()), "wall_s": wall})
            else:
                reason = "timed out" if done is None else (done.stderr.strip().splitlines() or ["no output"])[-1]
                records.append({"stage": name, "wall_s": wall, "error": reason})
            print(f"rehearse_full: {name}: {records[-1].get('error') or 'done'} ({wall} s)", flush=True)

    spec = json.loads((work / "spec.json").read_text(encoding="utf-8"))
    samples = work / "outputs" / "samples.jsonl"
    completions = sum(len(json.loads(line)["completions"]) for line in samples.open()) if samples.is_file() else 32
    precision = device_precision(options.device, options.dtype)
    stage_plan = plans(spec["config"], precision, spec["prompt_tokens"], completions, spec["card_gib"])
    rows = comparison(records, stage_plan)
    memory = "peak RSS above the imports" if options.device == "cpu" else "torch.cuda.max_memory_reserved"
    markdown = table(rows, memory)
    result = {"device": options.device, "preset": options.preset, "dtype": options.dtype, "precision": precision.device,
              "machine": machine(options.device), "threads": options.threads or os.cpu_count(),
              "weights": spec["weights"], "card_gib": spec["card_gib"], "memory": memory,
              "prompt_tokens": spec["prompt_tokens"],
              "stages": rows,
              "plan": stage_plan, "wall_s": round(time.perf_counter() - started, 1)}
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "rehearse.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    (options.out / "rehearse.md").write_text(markdown + "\n", encoding="utf-8")
    print(markdown)
    print(f"rehearse_full: {result['wall_s']} s in all on {result['machine']} with {result['weights']}, sized for "
          f"{result['card_gib']} GiB; {options.out / 'rehearse.json'}")
    return 1 if any("error" in row for row in rows) else 0


def machine(device: str) -> str:
    """The processor or GPU the numbers came from."""
    if device == "cuda":
        import torch

        return f"{torch.cuda.get_device_name(0)} ({os.cpu_count()} CPUs)"
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    return f"{model}, {len(os.sched_getaffinity(0))} cores"


if __name__ == "__main__":
    sys.exit(main())
