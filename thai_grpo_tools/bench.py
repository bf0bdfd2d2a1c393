"""`make bench`: where the time goes on this machine (figures, not tests), printed and written to
results/bench/bench.json: one step of GRPO, Dr.GRPO, PPO and DPO and held-out sampling split into parts by timing
their methods in place (``PartTimer``; other = the step's wall time minus its parts). Needs the config's base, SFT
adapter, data and reward model (make bench builds them)."""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from pathlib import Path
from unittest import mock

PARTS = ("generation", "rewards", "reference/old log-probs", "forward", "backward", "optimizer")
PPO_PARTS = ("generation", "policy and reference log-probs", "value and reward passes", "forward (policy, value)",
             "backward and optimizer")
DPO_PARTS = ("forward (policy and reference)", "backward", "optimizer")
SAMPLING_PARTS = ("prefill (once per problem)", "sampling (decode)")


class PartTimer(contextlib.ExitStack):
    """Times named parts of each step by wrapping functions in place, undone on leaving the ``with`` block: ``wrap``
    adds ``owner.name``'s wall time to ``part`` (or to the name ``part(*args)`` gives; None: not timed)."""

    def __init__(self):
        super().__init__()
        self.steps: list[dict] = []
        self._start: float | None = None

    def begin_step(self, *_, **__) -> None:
        self.end_step()
        self.steps.append({})
        self._start = time.perf_counter()

    def end_step(self) -> None:
        if self._start is not None:
            self.steps[-1]["total"] = time.perf_counter() - self._start
            self._start = None

    def add(self, part: str, seconds: float) -> None:
        if self.steps:
            self.steps[-1][part] = self.steps[-1].get(part, 0.0) + seconds

    def patch(self, owner, name: str, function) -> None:
        self.enter_context(mock.patch.object(owner, name, function))

    def wrap(self, owner, name: str, part, before=None) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            if before:
                before(*args, **kwargs)
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                label = part(*args, **kwargs) if callable(part) else part
                if label:
                    self.add(label, time.perf_counter() - start)

        self.patch(owner, name, timed)

    def split(self, title: str, parts: tuple[str, ...], **fields) -> dict:
        """The mean split after the warm-up step (``step_split``), each step's own and ``fields``, printed."""
        self.end_step()
        steps = [{**{p: s.get(p, 0.0) for p in parts}, "total": s["total"],
                  "other": s["total"] - sum(s.get(p, 0.0) for p in parts)} for s in self.steps if "total" in s]
        split, threads = {**step_split(steps, 1, parts), "per_step": steps, **fields}, fields["threads"]
        print(f"{title} ({threads} thread{'s' if threads > 1 else ''}), mean of {split['steps_timed']} after a "
              f"warm-up: {split['seconds']['total']:.2f} s", flush=True)
        for part, share in split["share"].items():
            print(f"  {part:32s} {split['seconds'][part]:7.2f} s  {100 * share:5.1f}%")
        return split


def step_split(steps: list[dict], skip_first: int = 1, parts: tuple[str, ...] = PARTS) -> dict:
    """Mean seconds per part over the steps after the first ``skip_first`` (warm-up), with each part's share."""
    kept = steps[skip_first:] or steps
    means = {part: sum(s[part] for s in kept) / len(kept) for part in (*parts, "other", "total")}
    return {"steps_timed": len(kept), "seconds": means,
            "share": {part: means[part] / means["total"] for part in (*parts, "other")}}


# ----------------------------------------------------------------------------------------- the measurements
def without_grad(part: str):
    """A ``wrap`` part: ``part`` for a call made without gradients (a log-prob pass), untimed with them."""
    import torch

    return lambda *args, **kwargs: None if torch.is_grad_enabled() else part


def train_bench(config: dict, results: Path, variant: str, section: str, steps: int, threads: int, train,
                **extra) -> None:
    """``train(spec)`` on a run of ``variant`` stopped after ``steps`` steps, from the last run's models, in scratch."""
    import torch

    from thai_grpo.core.io import read_jsonl
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.methods import RunSpec
    from thai_grpo.workflow import variant_plan

    torch.set_num_threads(threads)
    plan = variant_plan(config, variant)
    plan = {**plan, section: {**plan[section], "max_steps": steps, "save_steps": steps + 1}}
    with tempfile.TemporaryDirectory() as work:
        train(RunSpec(run=f"bench-{variant}", plan=plan, base_dir=results / "model/base",
                      adapter_dir=results / "model/sft_adapter", train_rows=read_jsonl(results / "data/train.jsonl"),
                      system_prompt=config["data"].get("system_prompt", SYSTEM_PROMPT), out_dir=Path(work) / "out",
                      checkpoint_dir=Path(work) / f"bench-{variant}", seed=config["seed"],
                      training={"max_lost_update_share": 1.0, "report_to": "none"}, **extra))


def bench_grpo_step(config: dict, results: Path, steps: int, threads: int, variant: str = "grpo") -> dict:
    """``steps`` steps of a GRPO-family variant, each split into its parts."""
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from thai_grpo.methods.grpo import rollout_trainer

    def train(spec):
        trainer, *_ = rollout_trainer(GRPOTrainer, GRPOConfig, spec.plan["grpo_args"], spec)
        timer.wrap(trainer, "_generate", "generation")
        timer.wrap(trainer, "_calculate_rewards", "rewards")
        timer.wrap(trainer, "_get_per_token_logps_and_entropies", without_grad("reference/old log-probs"))
        timer.wrap(trainer, "compute_loss", "forward")
        timer.wrap(trainer.accelerator, "backward", "backward")
        trainer.add_callback(Events())
        trainer.train()

    class Events(TrainerCallback):
        def on_step_begin(self, *args, **kwargs):
            timer.begin_step()

        def on_pre_optimizer_step(self, *args, **kwargs):
            self.optimizer_start = time.perf_counter()

        def on_optimizer_step(self, *args, **kwargs):
            timer.add("optimizer", time.perf_counter() - self.optimizer_start)

        def on_step_end(self, *args, **kwargs):
            timer.end_step()

    with PartTimer() as timer:
        train_bench(config, results, variant, "grpo_args", steps, threads, train)
    return timer.split(f"{variant} step", PARTS, variant=variant, threads=threads)


def bench_ppo_step(config: dict, results: Path, steps: int, threads: int) -> dict:
    """``steps`` PPO steps (the config's ppo variant, with its reward model) split into their parts."""
    import thai_grpo.methods.ppo as ppo

    with PartTimer() as timer:
        timer.wrap(ppo, "_rollout", None, before=timer.begin_step)
        timer.wrap(ppo, "generate_by_chunks", "generation")
        timer.wrap(ppo, "sequence_logprobs", without_grad("policy and reference log-probs"))
        timer.wrap(ppo, "token_scores", without_grad("value and reward passes"))
        timer.wrap(ppo, "last_token_scores", "value and reward passes")
        timer.wrap(ppo, "_chunk_losses", "forward (policy, value)")
        update = ppo._update

        def timed_update(*args, **kwargs):  # backward and optimizer: the update but its forward passes
            start, before = time.perf_counter(), timer.steps[-1].get("forward (policy, value)", 0.0)
            try:
                return update(*args, **kwargs)
            finally:
                forward = timer.steps[-1].get("forward (policy, value)", 0.0) - before
                timer.add("backward and optimizer", time.perf_counter() - start - forward)

        timer.patch(ppo, "_update", timed_update)
        train_bench(config, results, "ppo", "ppo", steps, threads, ppo.train, reward_dir=results / "model/reward_model")
    return timer.split("ppo step", PPO_PARTS, threads=threads)


def bench_dpo_step(config: dict, results: Path, steps: int, threads: int) -> dict:
    """``steps`` DPO steps on the preference pairs (the config's dpo variant), split into their parts."""
    import accelerate
    import torch
    from trl import DPOTrainer

    from thai_grpo.core.io import read_jsonl
    from thai_grpo.methods import dpo

    with PartTimer() as timer:
        timer.wrap(DPOTrainer, "training_step", None, before=timer.begin_step)
        timer.wrap(DPOTrainer, "compute_loss", "forward (policy and reference)")
        timer.wrap(accelerate.Accelerator, "backward", "backward")
        timer.wrap(torch.optim.AdamW, "step", "optimizer")
        train_bench(config, results, "dpo", "dpo", steps, threads, dpo.train,
                    pairs=read_jsonl(results / "data/preference_pairs.jsonl"))
    return timer.split("dpo step", DPO_PARTS, threads=threads)


def bench_heldout_sampling(config: dict, results: Path, threads: int, problems: int) -> dict:
    """Held-out sampling of the SFT policy as the sample rule runs it, on the first ``problems`` held-out problems,
    split into the prompts' prefill and the decoding."""
    import torch

    import thai_grpo.models.decoding as decoding
    import thai_grpo.models.sampling as sampling
    from thai_grpo.workflow import eval_settings
    from thai_grpo.core.io import read_jsonl
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.models.loading import load_policy, load_tokenizer

    torch.set_num_threads(threads)
    ev = eval_settings(config)
    model = load_policy(results / "model/base", results / "model/sft_adapter", merged=True).eval()
    tokenizer = load_tokenizer(results / "model/base")
    rows = read_jsonl(results / "data/heldout.jsonl")[:problems]
    prefill, decode = SAMPLING_PARTS
    with PartTimer() as timer:
        timer.wrap(sampling, "generate", decode)
        timer.wrap(decoding, "prefill", prefill)
        for _ in range(2):  # a warm-up pass, then the timed one
            timer.begin_step()
            sampling.sample_heldout(model, tokenizer, rows, config["data"].get("system_prompt", SYSTEM_PROMPT),
                                    ev["num_samples"], ev["max_new_tokens"], ev["temperature"], ev["batch_size"],
                                    ev["seed"], ev.get("chat_template_kwargs"))
        for step in timer.steps:  # the prefill ran inside the sampling calls: count it once
            step[decode] = step.get(decode, 0.0) - step.get(prefill, 0.0)
        return timer.split(f"held-out sampling of {len(rows)} problems x {ev['num_samples']}", SAMPLING_PARTS,
                           threads=threads, problems=len(rows))


def main() -> None:
    import torch

    from thai_grpo.core.io import write_json
    from thai_grpo.jobs.machine import this_cpu
    from thai_grpo.workflow import load_config_files

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", nargs="+", default=["config/config.yaml"])
    parser.add_argument("--results", default="results")
    parser.add_argument("--grpo-steps", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--sampling-problems", type=int, default=64, help="held-out problems in the sampling split")
    options = parser.parse_args()
    config, results = load_config_files(options.configfile), Path(options.results)
    steps, threads = options.grpo_steps, options.threads
    report = {"cpu": this_cpu(),
              "cores": torch.get_num_threads(), "torch": torch.__version__,
              "grpo_step": [bench_grpo_step(config, results, steps, t) for t in threads],
              # each as the pipeline runs it: Dr.GRPO, PPO and DPO with 1 thread, held-out sampling with both
              "dr_grpo_step": bench_grpo_step(config, results, steps, 1, "dr_grpo"),
              "ppo_step": bench_ppo_step(config, results, steps, 1),
              "dpo_step": bench_dpo_step(config, results, steps + 2, 1),
              "heldout_sampling": [bench_heldout_sampling(config, results, t, options.sampling_problems)
                                   for t in threads]}
    write_json(results / "bench/bench.json", report)
    print(json.dumps({"cpu": report["cpu"], "written": str(results / "bench/bench.json")}))


if __name__ == "__main__":
    main()
