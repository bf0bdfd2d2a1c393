"""Where the time goes: the sampler against its forward-pass bound, one GRPO step split into its parts, and each
stage's share of the last run (``make bench`` -> results/bench/bench.json; figures, not pass/fail tests).

- Sampler bound: ``generate`` produces T new tokens one forward at a time (with a KV cache); one forward pass over
  the same final sequences does the same arithmetic at once. ratio = bound seconds / generate seconds (1 = the
  sampler is as fast as the model's arithmetic allows on this machine).
- GRPO step: TRL's GRPOTrainer methods timed in place (``StepTimer``): generation (``_generate``), rewards
  (``_calculate_rewards``), reference/old log-probs (``_get_per_token_logps_and_entropies`` without grad),
  forward (``compute_loss``, the policy's log-probs with grad and the loss), backward (``accelerator.backward``), optimizer (between the Trainer's pre- and
  post-optimizer-step events), other = step wall time minus those.
- Stages: ``results/benchmarks/*.tsv`` (Snakemake's benchmark directive); jobs at once = the most stage intervals
  [end - s, end] that overlap (end = the file's modification time).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

PARTS = ("generation", "rewards", "reference/old log-probs", "forward", "backward", "optimizer")
PPO_PARTS = ("generation", "policy and reference log-probs", "value and reward passes", "forward (policy, value)",
             "backward and optimizer")
DPO_PARTS = ("forward (policy and reference)", "backward", "optimizer")
SAMPLING_PARTS = ("prefill (once per problem)", "sampling (decode)", "greedy answers")


def _timed(seconds: list[float], function):
    """``function`` that adds its wall time to ``seconds``."""
    start = time.perf_counter()
    result = function()
    seconds.append(time.perf_counter() - start)
    return result


def sampler_throughput(model, tokenizer, questions: list[str], system_prompt: str, num_samples: int,
                       max_new_tokens: int, temperature: float, seed: int, chat_template_kwargs: dict | None = None):
    """Generated tokens per second of one ``generate`` call (len(questions) x num_samples sequences) and of one
    forward pass over the same final sequences (the bound), and their ratio."""
    import torch

    from thai_grpo.models.sampling import completion_length, encode_prompts, generation_config, stop_token_ids

    encoded = encode_prompts(tokenizer, questions, system_prompt, chat_template_kwargs or {})
    stop_ids = stop_token_ids(model, tokenizer)
    config = generation_config(tokenizer, stop_ids, num_samples, max_new_tokens, temperature)
    torch.manual_seed(seed)
    generate_s, forward_s = [], []
    with torch.no_grad():
        output = _timed(generate_s, lambda: model.generate(**encoded, generation_config=config))
        new = output[:, encoded["input_ids"].shape[1]:]
        generated = sum(completion_length(row.tolist(), stop_ids)[0] for row in new)
        mask = torch.cat([encoded["attention_mask"].repeat_interleave(num_samples, 0),
                          torch.ones_like(new)], dim=1)
        _timed(forward_s, lambda: model(input_ids=output, attention_mask=mask))
    return {"sequences": int(output.shape[0]), "prompt_tokens": int(encoded["input_ids"].shape[1]),
            "generated_tokens": generated, "generate_s": generate_s[0], "tokens_per_s": generated / generate_s[0],
            "bound_s": forward_s[0], "bound_tokens_per_s": generated / forward_s[0],
            "ratio_to_bound": forward_s[0] / generate_s[0]}


class StepTimer:
    """Times the parts of each GRPO step by wrapping the trainer's methods; ``steps`` holds one dict per step."""

    def __init__(self):
        self.steps: list[dict] = []
        self.current: dict = {}

    def _add(self, part: str, seconds: float) -> None:
        self.current[part] = self.current.get(part, 0.0) + seconds

    def wrap(self, owner, name: str, part):
        """Replace ``owner.name`` with a timed call; ``part`` is a part name, or a function of the call's arguments
        giving the part's name (None: not timed, it is inside another timed call)."""
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                name_of_part = part(*args, **kwargs) if callable(part) else part
                if name_of_part:
                    self._add(name_of_part, time.perf_counter() - start)

        setattr(owner, name, timed)

    def attach(self, trainer) -> None:
        import torch

        self.wrap(trainer, "_generate", "generation")
        self.wrap(trainer, "_calculate_rewards", "rewards")
        self.wrap(trainer, "_get_per_token_logps_and_entropies",
                  lambda *a, **k: None if torch.is_grad_enabled() else "reference/old log-probs")
        self.wrap(trainer, "compute_loss", "forward")
        self.wrap(trainer.accelerator, "backward", "backward")
        trainer.add_callback(self.callback())

    def callback(self):
        from transformers import TrainerCallback

        timer = self

        class Events(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                timer.current = {"_start": time.perf_counter()}

            def on_pre_optimizer_step(self, args, state, control, **kwargs):
                timer.current["_optimizer"] = time.perf_counter()

            def on_optimizer_step(self, args, state, control, **kwargs):
                timer._add("optimizer", time.perf_counter() - timer.current.pop("_optimizer"))

            def on_step_end(self, args, state, control, **kwargs):
                total = time.perf_counter() - timer.current.pop("_start")
                parts = {part: timer.current.get(part, 0.0) for part in PARTS}
                timer.steps.append({**parts, "other": total - sum(parts.values()), "total": total})

        return Events()


class PartTimer:
    """Times named parts of a loop by wrapping functions in place; ``begin_step`` starts a new step record.

    ``wrap(owner, name, part)``: ``owner.name`` (a module's function or an object's method) adds its wall time to
    ``part`` of the current step; ``part`` may be a function of the call's arguments giving the part's name (None:
    not timed, e.g. a call nested in another timed one). ``split(parts)`` gives the steps' means as ``step_split``
    does, with ``other`` = the step's wall time minus its timed parts (Python, bookkeeping, what is not wrapped)."""

    def __init__(self):
        self.steps: list[dict] = []
        self._start: float | None = None

    def begin_step(self) -> None:
        now = time.perf_counter()
        self.end_step(now)
        self.steps.append({})
        self._start = now

    def end_step(self, now: float | None = None) -> None:
        if self._start is not None and self.steps:
            self.steps[-1]["total"] = (now or time.perf_counter()) - self._start
            self._start = None

    def wrap(self, owner, name: str, part) -> None:
        original = getattr(owner, name)
        timer = self

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                label = part(*args, **kwargs) if callable(part) else part
                if label and timer.steps:
                    timer.steps[-1][label] = timer.steps[-1].get(label, 0.0) + time.perf_counter() - start

        setattr(owner, name, timed)

    def split(self, parts: tuple[str, ...], skip_first: int = 1) -> dict:
        self.end_step()
        steps = [{**{p: s.get(p, 0.0) for p in parts}, "total": s["total"],
                  "other": s["total"] - sum(s.get(p, 0.0) for p in parts)} for s in self.steps if "total" in s]
        return step_split(steps, skip_first, parts)


def step_split(steps: list[dict], skip_first: int = 1, parts: tuple[str, ...] = PARTS) -> dict:
    """Mean seconds per part over the steps after the first ``skip_first`` (warm-up), with each part's share."""
    kept = steps[skip_first:] or steps
    means = {part: sum(s[part] for s in kept) / len(kept) for part in (*parts, "other", "total")}
    return {"steps_timed": len(kept), "seconds": means,
            "share": {part: means[part] / means["total"] for part in (*parts, "other")}}


def max_concurrent(intervals: list[tuple[float, float]]) -> int:
    """The most intervals (start, end) that overlap at one moment (touching ends do not overlap)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
                    key=lambda event: (event[0], event[1]))
    running = best = 0
    for _, change in events:
        running += change
        best = max(best, running)
    return best


def seed_study_stage(stage: str) -> bool:
    """A stage `snakemake seeds` adds: the seed study's collection, or a run trained at another seed
    (``train-grpo-seed1``, ``sample-grpo-seed1``, ``score-grpo-seed1``; thai_grpo.core.seeds names the runs)."""
    from thai_grpo.core.seeds import SEED_MARK

    return stage == "seed_results" or re.search(rf"{re.escape(SEED_MARK)}\d+$", stage) is not None


def stage_shares(benchmark_dir: str | Path) -> dict:
    """Each stage's wall seconds (``results.benchmark_seconds``), share of their sum and whether the seed study
    added it, the sum, the seed study's part of it, and how many stages ran at once at most."""
    from thai_grpo.report.results import benchmark_seconds

    stages = benchmark_seconds(benchmark_dir)
    intervals = []
    for path in Path(benchmark_dir).glob("*.tsv"):
        if path.stem in stages:  # a job's interval ends when its benchmark file was written
            end = path.stat().st_mtime
            intervals.append((end - stages[path.stem], end))
    total = sum(stages.values())
    seeds = {name: s for name, s in stages.items() if seed_study_stage(name)}
    return {"stages": {name: {"seconds": s, "share": s / total, "seed_study": name in seeds} for name, s in
                       sorted(stages.items(), key=lambda item: -item[1])},
            "sum_seconds": total, "seed_study": {"stages": len(seeds), "seconds": sum(seeds.values())},
            "max_jobs_at_once": max_concurrent(intervals) if intervals else 0}
