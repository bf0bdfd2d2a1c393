"""`make bench-sampling`: held-out sampling before and after the decode loop, timed on this CPU (a measurement, not
a test), then what one decode step asks of the host; printed and written to results/sampling_bench/bench.json.

The held-out sampling stage (``sampling.sample_heldout``: the samples and the greedy answers) runs at the real
config's settings on the rehearsal's Qwen3-shaped stand-ins (built in --standins the first time), once through the
decode loop ("after") and once through the path it replaced ("before": ``generate`` with each prompt prefilled once),
on the same problems and seeds, interleaved so that a change in the machine's load falls on both alike. On a machine
that other jobs share, the figures are indicative only.

A decode step's counts at 160 and 1,024 rows on a Qwen3-shaped stand-in (full vocabulary, 4 layers, hidden 128): the
operators torch dispatches (its profiler's ``aten::`` events, each a kernel launch or more on a GPU) and the host's
reads of device data (``tolist``, ``item``, a tensor's truth value, and the operators whose output size depends on the
data, ``nonzero`` and kin: each a synchronisation on a GPU), a long call's less a one-token call's, per step; no row
stops, so no compaction is counted. The time plan prices a decode step's launches and synchronisations from these.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import time
from pathlib import Path

PATHS = ("before", "after")
SYNCING_OPS = ("aten::nonzero", "aten::masked_select", "aten::_unique2", "aten::unique_consecutive",
               "aten::_local_scalar_dense")  # their output's size, or value, is read on the host
HOST_READS = ("tolist", "item", "__bool__", "__int__", "__float__", "__index__")  # torch.Tensor's entry points


@dataclasses.dataclass(frozen=True)
class Counts:
    """Dispatched operators and host synchronisations of a call."""
    ops: int
    syncs: int

    def __sub__(self, other: "Counts") -> "Counts":
        return Counts(self.ops - other.ops, self.syncs - other.syncs)


@contextlib.contextmanager
def counted_host_reads(reads: list):
    """Within the block, each call of a ``HOST_READS`` method of a torch.Tensor appends its name to ``reads``."""
    import torch

    own = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def counting(name):
        def read(tensor, *args, **kwargs):
            reads.append(name)
            return own[name](tensor, *args, **kwargs)
        return read

    for name in HOST_READS:
        setattr(torch.Tensor, name, counting(name))
    try:
        yield
    finally:
        for name, method in own.items():
            setattr(torch.Tensor, name, method)


def count_call(call) -> Counts:
    """The operators ``call()`` dispatches and its host synchronisations (host reads, and syncing operators not
    already counted as one: ``item`` runs ``_local_scalar_dense``)."""
    from torch.profiler import ProfilerActivity, profile

    reads: list = []
    with profile(activities=[ProfilerActivity.CPU]) as profiler, counted_host_reads(reads):
        call()
    names = [event.name for event in profiler.events()]
    ops = sum(name.startswith("aten::") for name in names)
    syncing = sum(name in SYNCING_OPS for name in names) - sum(name == "aten::_local_scalar_dense" for name in names)
    return Counts(ops, len(reads) + syncing)


def per_step(model, prompts: int, samples: int, prompt: int = 32, steps: int = 32) -> dict:
    """A decode step's operators and synchronisations on ``prompts`` x ``samples`` rows, averaged over ``steps``
    steps (``sample_continuations`` at temperature 1, stop token id -1: no row stops)."""
    import torch

    from thai_grpo.models.sampling import generation_config, row_seeds, sample_continuations

    class Tokenizer:
        pad_token_id = 0

    ids = torch.randint(1, model.config.vocab_size, (prompts, prompt), generator=torch.Generator().manual_seed(0))
    mask, seeds = torch.ones_like(ids), row_seeds(0, range(prompts), samples)

    def call(budget: int):
        config = generation_config(Tokenizer, [-1], samples, budget, 1.0)
        return lambda: sample_continuations(model, ids, mask, config, seeds)

    with torch.no_grad():
        call(2)()  # warm: the first call pays for lazy imports and registrations
        counts = count_call(call(steps + 1)) - count_call(call(1))
    return {"rows": prompts * samples, "steps": steps, "ops_per_step": counts.ops / steps,
            "syncs_per_step": counts.syncs / steps}


def standin(vocab_size: int | None = None):
    """The Qwen3-shaped stand-in: Qwen3-0.6B's config at 4 layers and hidden 128 (``vocab_size``: another vocabulary,
    for a quicker count: the counts do not depend on it), random weights, float32."""
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


def interleaved(repeats: int) -> list[str]:
    """``repeats`` pairs of runs, every other pair reversed (before, after, after, before, ...)."""
    return [path for pair in range(repeats) for path in (PATHS if pair % 2 == 0 else PATHS[::-1])]


def summary(seconds: dict[str, list[float]]) -> dict:
    """Per path its runs' seconds and median, and the median before over the median after (> 1: after is faster)."""
    medians = {path: statistics.median(runs) for path, runs in seconds.items()}
    return {"seconds": seconds, "median_s": medians, "speedup": medians["before"] / medians["after"]}


def generate_sharing_continuations(model, input_ids, attention_mask, config, seeds: list, cuda_graphs: bool = False):
    """The path before the decode loop: ``generate`` with each prompt prefilled once, greedy over
    ``sampling.seeded_per_row``'s choices (the same draws)."""
    import torch

    from thai_grpo.models.cpu.shared_prefix import generate_sharing_prompts
    from thai_grpo.models.sampling import seeded_per_row

    greedy, processors = seeded_per_row(config, seeds, input_ids.device, input_ids.shape[1])
    with torch.no_grad():
        return generate_sharing_prompts(model, input_ids, attention_mask, greedy, logits_processor=processors)


@contextlib.contextmanager
def path_before():
    """Within the block, ``sample_heldout`` runs as before the decode loop: ``generate_sharing_continuations``."""
    import thai_grpo.models.sampling as sampling

    saved = sampling.sample_continuations
    sampling.sample_continuations = generate_sharing_continuations
    try:
        yield
    finally:
        sampling.sample_continuations = saved


def measure(folder: Path, problems: int, repeats: int, threads: int, settings: dict | None = None) -> dict:
    """Time the held-out sampling stage before and after, interleaved, on the stand-ins in ``folder``, and print it.
    ``settings``: eval settings over the real config's (num_samples, max_new_tokens, ...)."""
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
    seconds: dict[str, list[float]] = {path: [] for path in PATHS}
    records = {}
    for path in interleaved(repeats):
        with path_before() if path == "before" else contextlib.nullcontext():
            start = time.perf_counter()
            records[path] = sample_heldout(model, tokenizer, rows, config["data"]["system_prompt"], ev["num_samples"],
                                           ev["max_new_tokens"], ev["temperature"], batch, ev["seed"],
                                           ev.get("chat_template_kwargs"))
            seconds[path].append(time.perf_counter() - start)
        print(f"  {path:6s} {seconds[path][-1]:8.2f} s", flush=True)
    result = {**summary(seconds), "same_records": records["before"] == records["after"], "cpu": cpu,
              "threads": threads, "problems": len(rows), "batch_size": batch,
              "settings": {key: ev[key] for key in ("num_samples", "max_new_tokens", "temperature")}}
    print(f"median: before {result['median_s']['before']:.2f} s, after {result['median_s']['after']:.2f} s, "
          f"{result['speedup']:.2f}x; the same records: {'yes' if result['same_records'] else 'NO'}")
    return result


def main() -> None:
    # OpenMP threads waiting for work sleep instead of spinning (a spinning thread takes a core from the other jobs
    # and the timings from both); set before torch loads OpenMP.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=16, help="held-out problems per run (default 16)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each path, interleaved (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, as a sampling job gets (default 1)")
    parser.add_argument("--max-new-tokens", type=int, help="completion budget (default: the real config's)")
    parser.add_argument("--num-samples", type=int, help="samples per problem (default: the real config's)")
    parser.add_argument("--standins", type=Path, default=Path("results/sampling_bench/standins"))
    parser.add_argument("--out", type=Path, default=Path("results/sampling_bench/bench.json"))
    args = parser.parse_args()
    settings = {key: value for key, value in (("max_new_tokens", args.max_new_tokens),
                                              ("num_samples", args.num_samples)) if value is not None}
    result = measure(args.standins, args.problems, args.repeats, args.threads, settings)
    result["decode_step"] = decode_step_report()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
