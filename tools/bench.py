"""`make bench`: where the time goes on this machine (thai_grpo_tools.bench), printed and written to results/bench/bench.json.

Needs the base model, the SFT adapter and the data of the config (make bench builds them first); times depend on
the CPU, so the CPU's model name is recorded beside them.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

from thai_grpo.workflow import deep_merge, eval_settings, variant_plan
from thai_grpo.core.io import read_jsonl, write_json
from thai_grpo.data.prompts import SYSTEM_PROMPT
from thai_grpo.methods import RunSpec
from thai_grpo.models.loading import load_policy, load_tokenizer
from thai_grpo.jobs.machine import cpu_label, lscpu_fields
from thai_grpo_tools.bench import StepTimer, sampler_throughput, stage_shares, step_split
from thai_grpo_tools.speedup import extrapolate, read_benchmarks, simulate, workflow_jobs

WORKFLOW_FILES = ["Snakefile", "rules", "scripts", "config", "report", "envs", "profiles", "data", "assets"]


def cpu_name() -> str:
    return lscpu_fields().get("Model name") or platform.processor() or "unknown"


def cpu_kind() -> str:
    """The model name and widest vector instructions, as docs/reference names a CPU: 'AMD EPYC (AVX-512)'."""
    return cpu_label(cpu_name(), lscpu_fields().get("Flags", "").split())


def load_config(paths: list[str]) -> dict:
    config = {}
    for path in paths:
        config = deep_merge(config, yaml.safe_load(Path(path).read_text(encoding="utf-8")))
    return config


def bench_sampler(config: dict, results: Path, threads: list[int]) -> list[dict]:
    """Merged SFT policy at the eval generate call and at GRPO's generation batch; unmerged (as GRPO samples) too."""
    ev, grpo = eval_settings(config), variant_plan(config, "grpo")["grpo_args"]
    system = config["data"].get("system_prompt", SYSTEM_PROMPT)
    tokenizer = load_tokenizer(results / "model/base")
    questions = [r["question"] for r in read_jsonl(results / "data/heldout.jsonl")]
    prompts_per_step = grpo["per_device_train_batch_size"] // grpo["num_generations"]
    calls = [("eval call", True, ev["batch_size"], ev["num_samples"]),
             ("GRPO generation batch", True, prompts_per_step, grpo["num_generations"]),
             ("GRPO generation batch, LoRA unmerged", False, prompts_per_step, grpo["num_generations"])]
    rows = []
    for thread_count in threads:
        torch.set_num_threads(thread_count)
        for label, merged, problems, samples in calls:
            model = load_policy(results / "model/base", results / "model/sft_adapter", merged=merged).eval()
            sampler_throughput(model, tokenizer, questions[:2], system, 2, 8, 1.0, 0)  # warm-up
            row = sampler_throughput(model, tokenizer, questions[:problems], system, samples,
                                     ev["max_new_tokens"], ev["temperature"], ev["seed"],
                                     ev.get("chat_template_kwargs"))
            rows.append({"call": label, "threads": thread_count, "merged": merged, **row})
            print(f"sampler  {label:38s} threads {thread_count}  {row['sequences']:4d} seqs  "
                  f"{row['tokens_per_s']:8.0f} tok/s  bound {row['bound_tokens_per_s']:8.0f} tok/s  "
                  f"ratio {row['ratio_to_bound']:.2f}", flush=True)
    return rows


def print_split(title: str, split: dict) -> None:
    print(f"{title}, mean of {split['steps_timed']} after a warm-up: {split['seconds']['total']:.2f} s", flush=True)
    for part, share in split["share"].items():
        print(f"  {part:32s} {split['seconds'][part]:7.2f} s  {100 * share:5.1f}%")


def bench_spec(config: dict, results: Path, plan: dict, work: str, **extra) -> RunSpec:
    """A training run of ``plan`` from the last run's base and SFT adapter, writing into the folder ``work``."""
    return RunSpec(run=f"bench-{plan['variant']}", plan=plan, base_dir=results / "model/base",
                   adapter_dir=results / "model/sft_adapter", train_rows=read_jsonl(results / "data/train.jsonl"),
                   system_prompt=config["data"].get("system_prompt", SYSTEM_PROMPT), out_dir=Path(work) / "out",
                   checkpoint_dir=Path(work) / f"bench-{plan['variant']}", seed=config["seed"],
                   training={"max_lost_update_share": 1.0, "report_to": "none"}, **extra)


def bench_grpo_step(config: dict, results: Path, steps: int, threads: int, variant: str = "grpo") -> dict:
    """``steps`` steps of a GRPO-family variant with the config's settings from the SFT adapter, each split into
    its parts."""
    from trl import GRPOConfig, GRPOTrainer

    from thai_grpo.methods.grpo import rollout_trainer

    torch.set_num_threads(threads)
    plan = variant_plan(config, variant)
    args = {**plan["grpo_args"], "max_steps": steps, "save_steps": steps + 1}
    with tempfile.TemporaryDirectory() as work:
        trainer, *_ = rollout_trainer(GRPOTrainer, GRPOConfig, args, bench_spec(config, results, plan, work))
        timer = StepTimer()
        timer.attach(trainer)
        trainer.train()
    split = {**step_split(timer.steps), "variant": variant, "threads": threads, "per_step": timer.steps}
    print_split(f"{variant} step ({threads} threads)", split)
    return split


def bench_ppo_step(config: dict, results: Path, steps: int, threads: int) -> dict:
    """``steps`` PPO steps (the config's ppo variant, with its reward model) split into their parts."""
    import thai_grpo.methods.ppo as ppo
    from thai_grpo_tools.bench import PPO_PARTS, PartTimer

    torch.set_num_threads(threads)
    plan = variant_plan(config, "ppo")
    timer = PartTimer()
    original_rollout = ppo._rollout

    def rollout(*args, **kwargs):
        timer.begin_step()
        return original_rollout(*args, **kwargs)

    ppo._rollout = rollout
    no_grad = lambda name: lambda *a, **k: None if torch.is_grad_enabled() else name  # noqa: E731
    timer.wrap(ppo, "generate_by_chunks", "generation")
    timer.wrap(ppo, "sequence_logprobs", no_grad("policy and reference log-probs"))
    timer.wrap(ppo, "token_scores", no_grad("value and reward passes"))
    timer.wrap(ppo, "last_token_scores", "value and reward passes")
    timer.wrap(ppo, "_chunk_losses", "forward (policy, value)")
    update = ppo._update

    def timed_update(*args, **kwargs):
        start, before = time.perf_counter(), timer.steps[-1].get("forward (policy, value)", 0.0)
        try:
            return update(*args, **kwargs)
        finally:
            forward = timer.steps[-1].get("forward (policy, value)", 0.0) - before
            timer.steps[-1]["backward and optimizer"] = time.perf_counter() - start - forward

    ppo._update = timed_update
    try:
        with tempfile.TemporaryDirectory() as work:
            plan = {**plan, "ppo": {**plan["ppo"], "max_steps": steps, "save_steps": steps + 1}}
            ppo.train(bench_spec(config, results, plan, work, reward_dir=results / "model/reward_model"))
    finally:
        ppo._rollout, ppo._update = original_rollout, update
    split = {**timer.split(PPO_PARTS), "threads": threads}
    print_split(f"ppo step ({threads} thread{'s' if threads > 1 else ''})", split)
    return split


def bench_dpo_step(config: dict, results: Path, steps: int, threads: int) -> dict:
    """``steps`` DPO steps on the preference pairs (the config's dpo variant), split into their parts."""
    from thai_grpo.methods import dpo
    from thai_grpo_tools.bench import DPO_PARTS, PartTimer
    from trl import DPOTrainer

    torch.set_num_threads(threads)
    plan = variant_plan(config, "dpo")
    timer = PartTimer()
    methods = {name: getattr(DPOTrainer, name) for name in ("training_step", "compute_loss")}

    def training_step(self, *args, **kwargs):
        timer.begin_step()
        return methods["training_step"](self, *args, **kwargs)

    DPOTrainer.training_step = training_step
    timer.wrap(DPOTrainer, "compute_loss", lambda *a, **k: "forward (policy and reference)")
    import accelerate

    backward = accelerate.Accelerator.backward
    timer.wrap(accelerate.Accelerator, "backward", lambda *a, **k: "backward")
    optimizer_step = torch.optim.AdamW.step
    timer.wrap(torch.optim.AdamW, "step", lambda *a, **k: "optimizer")
    try:
        with tempfile.TemporaryDirectory() as work:
            plan = {**plan, "dpo": {**plan["dpo"], "max_steps": steps, "save_steps": steps + 1}}
            dpo.train(bench_spec(config, results, plan, work,
                                 pairs=read_jsonl(results / "data/preference_pairs.jsonl")))
    finally:
        for name, method in methods.items():
            setattr(DPOTrainer, name, method)
        accelerate.Accelerator.backward, torch.optim.AdamW.step = backward, optimizer_step
    split = {**timer.split(DPO_PARTS), "threads": threads}
    print_split(f"dpo step ({threads} thread{'s' if threads > 1 else ''})", split)
    return split


def bench_heldout_sampling(config: dict, results: Path, threads: int, problems: int) -> dict:
    """Held-out sampling of the SFT policy as the sample rule runs it (merged adapter, eval settings) on the first
    ``problems`` held-out problems, split into prefill, decoding and the greedy answers."""
    import thai_grpo.models.decoding as decoding
    import thai_grpo.models.sampling as sampling
    from thai_grpo_tools.bench import SAMPLING_PARTS, PartTimer

    torch.set_num_threads(threads)
    ev = eval_settings(config)
    model = load_policy(results / "model/base", results / "model/sft_adapter", merged=True).eval()
    tokenizer = load_tokenizer(results / "model/base")
    rows = read_jsonl(results / "data/heldout.jsonl")[:problems]
    timer = PartTimer()
    generate = sampling.generate
    greedy_call = [False]  # whether the generate call running now is a greedy one (its prefill is not split off)

    def timed_generate(*args, **kwargs):
        start = time.perf_counter()
        greedy_call[0] = args[6] is None if len(args) > 6 else kwargs.get("temperature") is None
        try:
            return generate(*args, **kwargs)
        finally:
            part = "greedy answers" if greedy_call[0] else "sampling (decode)"
            timer.steps[-1][part] = timer.steps[-1].get(part, 0.0) + time.perf_counter() - start

    sampling.generate = timed_generate
    timer.wrap(decoding, "prefill", lambda *args: None if greedy_call[0] else "prefill (once per problem)")
    try:
        for _ in range(2):  # a warm-up pass, then the timed one
            timer.begin_step()
            sampling.sample_heldout(model, tokenizer, rows, config["data"].get("system_prompt", SYSTEM_PROMPT),
                                    ev["num_samples"], ev["max_new_tokens"], ev["temperature"], ev["batch_size"],
                                    ev["seed"], ev.get("chat_template_kwargs"))
    finally:
        sampling.generate = generate
    split = timer.split(SAMPLING_PARTS)
    seconds = split["seconds"]  # the prefill ran inside the sampling calls: count it once
    seconds["sampling (decode)"] -= seconds["prefill (once per problem)"]
    seconds["other"] = seconds["total"] - sum(seconds[part] for part in SAMPLING_PARTS)
    split["share"] = {part: seconds[part] / seconds["total"] for part in (*SAMPLING_PARTS, "other")}
    split.update(threads=threads, problems=len(rows))
    print_split(f"held-out sampling of {len(rows)} problems x {ev['num_samples']} ({threads} thread"
                f"{'s' if threads > 1 else ''})", split)
    return split


def bench_cores(configfiles: list[str], results: Path, cores: list[int]) -> dict:
    """The last run's critical path and its wall time extrapolated to ``cores`` (thai_grpo_tools.speedup)."""
    jobs = workflow_jobs(".", configfiles, ("all",), cores=2)
    measured = read_benchmarks(results / "benchmarks")
    seconds = {name: measured[name] for name in jobs if name in measured}
    missing = sorted(name for name, job in jobs.items() if name not in measured and job["rule"] not in
                     ("all", "results", "report", "headline"))
    estimate = extrapolate(seconds, {n: j["deps"] for n, j in jobs.items()},
                           {n: j["threads"] for n, j in jobs.items()}, cores)
    print(f"last run's DAG (rule all): {len(jobs)} jobs, {estimate['core_seconds']:.0f} core-seconds, critical path "
          f"{estimate['critical_path_s']:.0f} s: {' -> '.join(estimate['critical_path'])}")
    for n, row in estimate["cores"].items():
        times = simulate(seconds, jobs, int(n))  # Snakemake's own choice of jobs, replayed at the measured seconds
        row["simulated_wall_s"] = max(end for _, end in times.values())
        row["simulated_headline_s"] = times["headline"][1] if "headline" in times else None
        headline = f", headline at {row['simulated_headline_s']:.0f} s" if "headline" in times else ""
        print(f"  {n:>2} cores: >= {row['wall_s']:6.0f} s of jobs  (x{row['speedup']:.2f}; bound: {row['bound']}); "
              f"scheduled as Snakemake does: {row['simulated_wall_s']:.0f} s{headline}")
    if missing:
        print(f"  (no benchmark for {len(missing)} jobs, counted 0 s: {', '.join(missing[:6])}"
              f"{' ...' if len(missing) > 6 else ''})")
    return {**estimate, "jobs_without_benchmark": missing}


def bench_other_cpus(configfiles: list[str], results: Path, elsewhere: Path, this_cpu: str) -> list[dict]:
    """The last run on the other CPUs of ``elsewhere`` (docs/reference/elsewhere.json ``stage_seconds``): each stage's
    measured seconds here times its ratio between the two CPUs (both measured at one commit, ``stage_ratios``),
    replayed on 2 cores as Snakemake schedules it (``simulate``); and, for comparison, every stage at 2x."""
    from thai_grpo.core.io import read_json
    from thai_grpo_tools.speedup import projected_seconds, stage_ratios

    records = read_json(elsewhere).get("stage_seconds", []) if elsewhere.exists() else []
    jobs = workflow_jobs(".", configfiles, ("all",), cores=2)
    measured = read_benchmarks(results / "benchmarks")
    seconds = {name: measured.get(name, 0.0) for name in jobs}
    kind = this_cpu.split(",")[0]
    base = next((r for r in records if r["cpu"].split(",")[0] == kind), None)
    rows = []
    if base is None:
        print(f"other CPUs: no stage times of this CPU kind ({kind}) in {elsewhere} to take ratios from")
        return rows
    for record in records:
        if record is base or record["commit"] != base["commit"]:
            continue
        ratios = stage_ratios(base["seconds"], record["seconds"], record.get("rule_ranges"))
        for label, there in ((f"by the stage ratios measured at {record['commit']}", projected_seconds(seconds, ratios)),
                             ("every stage at 2x", {n: 2 * s for n, s in seconds.items()})):
            times = simulate(there, jobs, 2)
            row = {"cpu": record["cpu"], "model": label, "median_ratio": ratios["median"],
                   "jobs_s": max(end for _, end in times.values()),
                   "headline_s": times["headline"][1] if "headline" in times else None}
            rows.append(row)
            print(f"{record['cpu']}: the last run's jobs {row['jobs_s']:.0f} s, headline at {row['headline_s']:.0f} s "
                  f"({label}; median ratio {ratios['median']:.2f}); add the venv build", flush=True)
    return rows


def bench_smoke(cores: list[int]) -> list[dict]:
    """Measured wall seconds of the smoke config's whole DAG (toy sizes) at each core count, each from scratch."""
    rows = []
    for n in cores:
        with tempfile.TemporaryDirectory() as tmp:
            for name in WORKFLOW_FILES:
                if Path(name).exists():
                    (shutil.copytree if Path(name).is_dir() else shutil.copy)(name, Path(tmp) / name)
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(n), "--configfile",
                                   "config/smoke.yaml", "-q"], cwd=tmp, capture_output=True, text=True,
                                  env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"})
            wall = time.perf_counter() - start
        if done.returncode:
            raise SystemExit(f"smoke run at --cores {n} failed:\n{(done.stdout + done.stderr)[-2000:]}")
        rows.append({"cores": n, "wall_s": wall})
        print(f"smoke DAG (config/smoke.yaml) at --cores {n}: {wall:.0f} s", flush=True)
    if len(rows) > 1:
        print(f"  speed-up {rows[0]['cores']} -> {rows[-1]['cores']} cores: x{rows[0]['wall_s'] / rows[-1]['wall_s']:.2f}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configfile", nargs="+", default=["config/config.yaml"])
    parser.add_argument("--results", default="results")
    parser.add_argument("--grpo-steps", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--sampling-problems", type=int, default=64, help="held-out problems in the sampling split")
    parser.add_argument("--elsewhere", default="docs/reference/elsewhere.json",
                        help="other CPUs' stage times (stage_seconds), for the last run's projection onto them")
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 2, 4, 8, 16],
                        help="core counts of the last run's critical-path extrapolation")
    parser.add_argument("--smoke-cores", type=int, nargs="*", default=[1, 2],
                        help="core counts at which to time the smoke DAG (none: skip)")
    options = parser.parse_args()
    config, results = load_config(options.configfile), Path(options.results)
    report = {"cpu": cpu_name(), "cores": torch.get_num_threads(), "torch": torch.__version__,
              "sampler": bench_sampler(config, results, options.threads),
              "grpo_step": [bench_grpo_step(config, results, options.grpo_steps, t) for t in options.threads],
              # each as the pipeline runs it: Dr.GRPO, PPO and DPO with 1 thread, held-out sampling with both
              "dr_grpo_step": bench_grpo_step(config, results, options.grpo_steps, 1, "dr_grpo"),
              "ppo_step": bench_ppo_step(config, results, options.grpo_steps, 1),
              "dpo_step": bench_dpo_step(config, results, options.grpo_steps + 2, 1),
              "heldout_sampling": [bench_heldout_sampling(config, results, t, options.sampling_problems)
                                   for t in options.threads],
              "last_run": stage_shares(results / "benchmarks"),
              "cores": bench_cores(options.configfile, results, options.cores),
              "other_cpus": bench_other_cpus(options.configfile, results, Path(options.elsewhere), cpu_kind()),
              "smoke": bench_smoke(options.smoke_cores)}
    last = report["last_run"]
    print(f"last run: {len(last['stages'])} stages, {last['sum_seconds']:.0f} s of stage time, "
          f"at most {last['max_jobs_at_once']} at once")
    for name, stage in last["stages"].items():
        print(f"  {name:28s} {stage['seconds']:8.1f} s  {100 * stage['share']:5.1f}%"
              f"{'  (snakemake seeds)' if stage['seed_study'] else ''}")
    if last["seed_study"]["stages"]:
        print(f"  of which the seed study (snakemake seeds): {last['seed_study']['stages']} stages, "
              f"{last['seed_study']['seconds']:.0f} s")
    write_json(results / "bench/bench.json", report)
    print(json.dumps({"cpu": report["cpu"], "written": str(results / "bench/bench.json")}))


if __name__ == "__main__":
    main()
