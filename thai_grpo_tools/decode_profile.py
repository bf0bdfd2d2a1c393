"""What one step of the decode loop asks of the host, counted on this CPU: the operators torch dispatches (its
profiler's ``aten::`` events, each a kernel launch or more on a GPU) and the host's reads of device data (``tolist``,
``item``, a tensor's truth value, and the operators whose output size depends on the data, ``nonzero`` and kin: each a
synchronisation on a GPU). The time plan prices a decode step's launches and synchronisations from these counts.

A step's counts are a long call's less a one-token call's (the prefill, the first choice, the output), per step; no
row stops (no stop token can be drawn), so no compaction is counted. ``python -m thai_grpo_tools.decode_profile``
prints them at 160 and 1,024 rows on the Qwen3-shaped stand-in (its full vocabulary, 4 layers, hidden 128).
"""

from __future__ import annotations

import contextlib
import dataclasses

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


def report() -> list[dict]:
    """``compare_rows`` on the full-size stand-in, printed."""
    import json

    import torch

    torch.set_num_threads(2)
    counts = compare_rows(standin())
    for line in counts:
        print(json.dumps(line))
    low, high = (line["ops_per_step"] for line in counts)
    print(f"operators per decode step: {low:.0f} at {counts[0]['rows']} rows, {high:.0f} at {counts[1]['rows']} rows "
          f"({high / low - 1:+.1%}); host reads per step: " + ", ".join(f"{line['syncs_per_step']:.3f}" for line in counts))
    return counts


if __name__ == "__main__":
    report()
