"""`make bench-sampling`: held-out sampling timed on this CPU (a measurement, not a test), then what one decode step
asks of the host; printed and written to results/sampling_bench/bench.json. ``sampling.sample_heldout`` runs at the real
config's settings on the rehearsal's Qwen3-shaped stand-ins (built in --standins the first time). A decode step at 160
and 1,024 rows (full vocabulary, 4 layers, hidden 128): the operators torch dispatches (each a kernel launch or more on
a GPU) and the host's reads of device data (each a synchronisation on a GPU), per step; no row stops.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

SYNCING_OPS = ("aten::nonzero", "aten::masked_select", "aten::_unique2", "aten::unique_consecutive",
               "aten::_local_scalar_dense")  # their output's size, or value, is read on the host
HOST_READS = ("tolist", "item", "__bool__", "__int__", "__float__", "__index__")  # torch.Tensor's entry points


def counted_host_reads(reads: list) -> contextlib.ExitStack:
    """Within the block, each call of a ``HOST_READS`` method of a torch.Tensor appends its name to ``reads``."""
    import torch

    def counting(name, own):
        return lambda tensor, *args, **kwargs: reads.append(name) or own(tensor, *args, **kwargs)

    stack = contextlib.ExitStack()
    for name in HOST_READS:
        stack.enter_context(mock.patch.object(torch.Tensor, name, counting(name, getattr(torch.Tensor, name))))
    return stack


def count_call(call) -> tuple[int, int]:
    """The operators ``call()`` dispatches and its host synchronisations (``item``'s ``_local_scalar_dense`` once)."""
    from torch.profiler import ProfilerActivity, profile

    reads: list = []
    with profile(activities=[ProfilerActivity.CPU]) as profiler, counted_host_reads(reads):
        call()
    names = [event.name for event in profiler.events()]
    ops = sum(name.startswith("aten::") for name in names)
    syncing = sum(name in SYNCING_OPS for name in names) - sum(name == "aten::_local_scalar_dense" for name in names)
    return ops, len(reads) + syncing


def per_step(model, prompts: int, samples: int, prompt: int = 32, steps: int = 32) -> dict:
    """A decode step's operators and synchronisations on ``prompts`` x ``samples`` rows (no row stops), per step."""
    import torch

    from thai_grpo.models.sampling import generation_config, row_seeds, sample_continuations

    ids = torch.randint(1, model.config.vocab_size, (prompts, prompt), generator=torch.Generator().manual_seed(0))
    mask, seeds = torch.ones_like(ids), row_seeds(0, range(prompts), samples)

    def call(budget: int):
        config = generation_config(SimpleNamespace(pad_token_id=0), [-1], samples, budget, 1.0)
        return lambda: sample_continuations(model, ids, mask, config, seeds)

    with torch.no_grad():
        call(2)()  # warm: the first call pays for lazy imports and registrations
        (ops, syncs), (one_ops, one_syncs) = count_call(call(steps + 1)), count_call(call(1))
    return {"rows": prompts * samples, "steps": steps, "ops_per_step": (ops - one_ops) / steps,
            "syncs_per_step": (syncs - one_syncs) / steps}


def standin(vocab_size: int | None = None):
    """Qwen3-0.6B's config at 4 layers and hidden 128, random float32 weights (``vocab_size``: a quicker count)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from thai_grpo_tools.rehearsal import QWEN3_0_6B_CONFIG

    config = {**QWEN3_0_6B_CONFIG, "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 384, "torch_dtype": "float32"}
    torch.manual_seed(0)
    return Qwen3ForCausalLM(Qwen3Config(**{**config, **({"vocab_size": vocab_size} if vocab_size else {})})).eval()


def compare_rows(model, rows: tuple[int, ...] = (160, 1024), samples: int = 8, steps: int = 32) -> list[dict]:
    """``per_step`` at each row count of ``rows`` (``rows / samples`` prompts of ``samples``)."""
    return [per_step(model, count // samples, samples, steps=steps) for count in rows]


def decode_step_report() -> list[dict]:
    """``compare_rows`` on the full-size stand-in, printed."""
    import torch

    torch.set_num_threads(2)
    counts = compare_rows(standin())
    for line in counts:
        print(json.dumps(line))
    low, high = (line["ops_per_step"] for line in counts)
    print(f"operators per decode step: {low:.0f} at {counts[0]['rows']} rows, {high:.0f} at {counts[1]['rows']} rows "
          f"({high / low - 1:+.1%}); host reads per step: " + ", ".join(f"{line['syncs_per_step']:.3f}" for line in counts))
    return counts


def measure(folder: Path, problems: int, repeats: int, threads: int, settings: dict | None = None) -> dict:
    """The held-out sampling stage ``repeats`` times on the stand-ins in ``folder`` (``settings`` over the real config's
    eval settings), timed and printed."""
    import torch

    from thai_grpo.workflow import eval_settings
    from thai_grpo.jobs.machine import this_cpu
    from thai_grpo.jobs.memory_stages import sampling_sizes
    from thai_grpo.models.frozen import load_for_evaluation
    from thai_grpo.models.loading import load_tokenizer
    from thai_grpo.models.sampling import sample_heldout
    from thai_grpo_tools.memory_plan import REPO, real_config
    from thai_grpo_tools.rehearsal import standin_models, synthetic_rows

    config = real_config(REPO)
    ev = {**eval_settings(config), **(settings or {})}
    base, adapter = standin_models(folder, config["data"]["system_prompt"])
    torch.set_num_threads(threads)
    model = load_for_evaluation(base, adapter, ev.get("dtype", "float32"))
    tokenizer, rows = load_tokenizer(base), synthetic_rows(problems, seed=11)
    batch = sampling_sizes(ev["batch_size"], base, ev["num_samples"], ev["max_new_tokens"], len(rows),
                           "cpu")["batch_size"]
    cpu = this_cpu()
    print(f"CPU: {cpu}; {threads} thread(s)\nheld-out sampling of {len(rows)} problems x {ev['num_samples']} samples "
          f"+ greedy, budget {ev['max_new_tokens']} tokens, {batch} problems per call, stand-ins in {folder}")
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        sample_heldout(model, tokenizer, rows, config["data"]["system_prompt"], ev["num_samples"], ev["max_new_tokens"],
                       ev["temperature"], batch, ev["seed"], ev.get("chat_template_kwargs"))
        seconds.append(time.perf_counter() - start)
        print(f"  {seconds[-1]:8.2f} s", flush=True)
    print(f"median: {statistics.median(seconds):.2f} s")
    return {"seconds": seconds, "median_s": statistics.median(seconds), "cpu": cpu, "threads": threads,
            "problems": len(rows), "batch_size": batch,
            "settings": {key: ev[key] for key in ("num_samples", "max_new_tokens", "temperature")}}


def main() -> None:
    # OpenMP threads waiting for work sleep instead of spinning (a spinning thread takes a core from the other jobs
    # and the timings from both); set before torch loads OpenMP.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=16, help="held-out problems per run (default 16)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, as a sampling job gets (default 1)")
    parser.add_argument("--max-new-tokens", type=int, help="completion budget (default: the real config's)")
    parser.add_argument("--num-samples", type=int, help="samples per problem (default: the real config's)")
    parser.add_argument("--standins", type=Path, default=Path("results/sampling_bench/standins"))
    parser.add_argument("--out", type=Path, default=Path("results/sampling_bench/bench.json"))
    args = parser.parse_args()
    settings = {key: value for key, value in vars(args).items()
                if key in ("max_new_tokens", "num_samples") and value is not None}
    result = measure(args.standins, args.problems, args.repeats, args.threads, settings)
    result["decode_step"] = decode_step_report()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
