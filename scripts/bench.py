"""`make bench`: where the time goes on this machine (thai_grpo.report.bench), printed and written to results/bench/bench.json.

Needs the base model, the SFT adapter and the data of the config (make bench builds them first); times depend on
the CPU, so the CPU's model name is recorded beside them.
"""

import argparse
import json
import platform
import tempfile
from pathlib import Path

import torch
import yaml

from thai_grpo.core.config import deep_merge, eval_settings
from thai_grpo.core.io import read_jsonl, write_json
from thai_grpo.data.problems import SYSTEM_PROMPT
from thai_grpo.methods import variant_plan
from thai_grpo.models.loading import load_policy, load_tokenizer
from thai_grpo.report.bench import StepTimer, lscpu_fields, sampler_throughput, stage_shares, step_split


def cpu_name() -> str:
    return lscpu_fields().get("Model name") or platform.processor() or "unknown"


def load_config(paths: list[str]) -> dict:
    config = {}
    for path in paths:
        config = deep_merge(config, yaml.safe_load(Path(path).read_text(encoding="utf-8")))
    return config


def bench_sampler(config: dict, results: Path, threads: list[int]) -> list[dict]:
    """Merged SFT policy at the eval generate call and at GRPO's generation batch; unmerged (as GRPO samples) too."""
    ev, grpo = eval_settings(config), variant_plan(config, "grpo")["grpo"]
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


def bench_grpo_step(config: dict, results: Path, steps: int, threads: int) -> dict:
    """``steps`` GRPO steps with the config's settings from the SFT adapter, each split into its parts."""
    from trl import GRPOConfig, GRPOTrainer

    from thai_grpo.methods.grpo import rollout_trainer

    torch.set_num_threads(threads)
    plan = variant_plan(config, "grpo")
    args = {**plan["grpo"], "max_steps": steps, "save_steps": steps + 1}
    with tempfile.TemporaryDirectory() as checkpoints:
        trainer, *_ = rollout_trainer(GRPOTrainer, GRPOConfig, args, results / "model/base",
                                      results / "model/sft_adapter", read_jsonl(results / "data/train.jsonl"),
                                      plan["rewards"], config["data"].get("system_prompt", SYSTEM_PROMPT),
                                      Path(checkpoints) / "bench-grpo", config["seed"])
        timer = StepTimer()
        timer.attach(trainer)
        trainer.train()
    split = {**step_split(timer.steps), "threads": threads, "per_step": timer.steps}
    print(f"GRPO step ({threads} threads, mean of {split['steps_timed']} after a warm-up): "
          f"{split['seconds']['total']:.2f} s", flush=True)
    for part, share in split["share"].items():
        print(f"  {part:26s} {split['seconds'][part]:7.2f} s  {100 * share:5.1f}%")
    return split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configfile", nargs="+", default=["config/config.yaml"])
    parser.add_argument("--results", default="results")
    parser.add_argument("--grpo-steps", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    options = parser.parse_args()
    config, results = load_config(options.configfile), Path(options.results)
    report = {"cpu": cpu_name(), "cores": torch.get_num_threads(), "torch": torch.__version__,
              "sampler": bench_sampler(config, results, options.threads),
              "grpo_step": [bench_grpo_step(config, results, options.grpo_steps, t) for t in options.threads],
              "last_run": stage_shares(results / "benchmarks")}
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
