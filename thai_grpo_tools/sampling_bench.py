"""Held-out sampling before and after the decode loop, timed on this CPU: a maintainer's measurement, not a test.

``python tools/sampling_bench.py`` (``make bench-sampling``) runs the held-out sampling stage
(``sampling.sample_heldout``: the samples, then the greedy answers) at the real config's settings on the rehearsal's
Qwen3-shaped stand-ins (``thai_grpo_tools.rehearsal``: Qwen3-0.6B's config but for depth and width, the 151,936-token
vocabulary), once through the decode loop (``thai_grpo.models.decoding``, "after") and once through the path it
replaced ("before": ``generate`` with each prompt prefilled once, ``shared_prefix.generate_sharing_prompts``, and
greedy calls of batch x samples problems). Both run on the same problems with the same seeds, interleaved (before,
after, after, before, ...) so that a change in the machine's load falls on both alike. It prints each run's seconds,
the medians and their ratio, whether the two gave the same records, and the CPU (lscpu's model name, and whether its
flags have avx512f). On a machine that other jobs share, the figures are indicative only.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from pathlib import Path

PATHS = ("before", "after")


def interleaved(repeats: int) -> list[str]:
    """The order of the runs: ``repeats`` pairs, every other pair reversed (before, after, after, before, ...), so that
    neither path always runs first or last."""
    return [path for pair in range(repeats) for path in (PATHS if pair % 2 == 0 else PATHS[::-1])]


def summary(seconds: dict[str, list[float]]) -> dict:
    """Per path its runs' seconds and median, and the median before over the median after (> 1: after is faster)."""
    medians = {path: statistics.median(runs) for path, runs in seconds.items()}
    return {"seconds": seconds, "median_s": medians, "speedup": medians["before"] / medians["after"]}


def generate_sharing_continuations(model, input_ids, attention_mask, config, seeds: list[int]):
    """The path before the decode loop: ``generate`` over the rows, each prompt prefilled once, greedy over each row's
    Gumbel-perturbed scores (``sampling.seeded_per_row``)."""
    import torch

    from thai_grpo.models.sampling import seeded_per_row
    from thai_grpo.models.cpu.shared_prefix import generate_sharing_prompts

    greedy, processors = seeded_per_row(config, seeds, input_ids.device)
    with torch.no_grad():
        return generate_sharing_prompts(model, input_ids, attention_mask, greedy, logits_processor=processors)


@contextlib.contextmanager
def path_before():
    """Within the block, ``sample_heldout`` runs as it did before the decode loop: ``generate_sharing_continuations``,
    and greedy calls of batch_size x num_samples problems."""
    import thai_grpo.jobs.memory_stages as memory_stages
    import thai_grpo.models.sampling as sampling

    saved = sampling.sample_continuations, memory_stages.greedy_problems_per_call
    sampling.sample_continuations = generate_sharing_continuations
    memory_stages.greedy_problems_per_call = lambda shape, problems, samples, *args, **kwargs: problems * samples
    try:
        yield
    finally:
        sampling.sample_continuations, memory_stages.greedy_problems_per_call = saved


def cpu_line() -> str:
    """lscpu's model name and whether its flags have avx512f (the kernels, and so the last digits, differ with it)."""
    from thai_grpo.jobs.machine import lscpu_fields

    fields = lscpu_fields()
    has = "avx512f" in fields.get("Flags", "").split()
    return f"{fields.get('Model name', 'unknown CPU')}; avx512f in its flags: {'yes' if has else 'no'}"


def standins(folder: Path, config: dict) -> tuple[Path, Path]:
    """(base, adapter): the rehearsal's stand-ins for the real config's base and SFT adapter, built in ``folder`` the
    first time (a minute or two: the base is taught its think-block habit), reused after."""
    from thai_grpo_tools.rehearsal import build_standin_adapter, build_standin_base, standin_problems

    base, adapter = folder / "base", folder / "adapter"
    if not (base / "config.json").exists():
        base.mkdir(parents=True, exist_ok=True)
        build_standin_base(base, standin_problems(24), [], config["data"]["system_prompt"])
    if not (adapter / "adapter_config.json").exists():
        build_standin_adapter(base, adapter)
    return base, adapter


def heldout_rows(count: int, seed: int = 11) -> list[dict]:
    """``count`` synthetic Thai problems in the held-out set's format (id, question, answer)."""
    from thai_grpo.data.synthetic import generate_problems

    return [{"id": f"p{i}", "question": row["translated_question"], "answer": row["answer"]}
            for i, row in enumerate(generate_problems(count, seed=seed, max_operand=9))]


def measure(folder: Path, problems: int, repeats: int, threads: int, settings: dict | None = None) -> dict:
    """Time the held-out sampling stage before and after, interleaved, on the stand-ins in ``folder``, and print it.
    ``settings``: eval settings over the real config's (num_samples, max_new_tokens, batch_size, ...)."""
    import torch

    from thai_grpo.workflow import eval_settings
    from thai_grpo.models.loading import load_for_evaluation, load_tokenizer
    from thai_grpo.jobs.memory_stages import sampling_sizes
    from thai_grpo.models.sampling import sample_heldout
    from thai_grpo_tools.stage_plans import real_config

    config = real_config(Path(__file__).resolve().parents[1])
    ev = {**eval_settings(config), **(settings or {})}
    base, adapter = standins(folder, config)
    torch.set_num_threads(threads)
    model = load_for_evaluation(base, adapter, ev.get("dtype", "float32"))
    tokenizer, rows = load_tokenizer(base), heldout_rows(problems)
    batch = sampling_sizes(ev["batch_size"], base, ev["num_samples"], ev["max_new_tokens"], len(rows),
                           "cpu")["batch_size"]
    print(f"CPU: {cpu_line()}; {threads} thread(s)")
    print(f"held-out sampling of {len(rows)} problems x {ev['num_samples']} samples + greedy, budget "
          f"{ev['max_new_tokens']} tokens, {batch} problems per call, stand-ins in {folder}")

    def stage():
        return sample_heldout(model, tokenizer, rows, config["data"]["system_prompt"], ev["num_samples"],
                              ev["max_new_tokens"], ev["temperature"], batch, ev["seed"],
                              ev.get("chat_template_kwargs"))

    seconds: dict[str, list[float]] = {path: [] for path in PATHS}
    records = {}
    for path in interleaved(repeats):
        with path_before() if path == "before" else contextlib.nullcontext():
            start = time.perf_counter()
            records[path] = stage()
            seconds[path].append(time.perf_counter() - start)
        print(f"  {path:6s} {seconds[path][-1]:8.2f} s", flush=True)
    result = {**summary(seconds), "same_records": records["before"] == records["after"], "cpu": cpu_line(),
              "threads": threads, "problems": len(rows), "batch_size": batch,
              "settings": {key: ev[key] for key in ("num_samples", "max_new_tokens", "temperature")}}
    print(f"median: before {result['median_s']['before']:.2f} s, after {result['median_s']['after']:.2f} s, "
          f"{result['speedup']:.2f}x; the same records: {'yes' if result['same_records'] else 'NO'}")
    return result
