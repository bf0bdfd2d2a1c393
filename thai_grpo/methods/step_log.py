"""What a training run records step by step beside its checkpoints (``step_metrics.jsonl``, ``updates.jsonl``,
``rollouts.jsonl``: every graded completion, from which the report picks its example groups), and how a resumed run
picks it up: a run resumed from checkpoint-N keeps the records of steps up to N and sees the prompts in the order an
uninterrupted run would.
"""

from __future__ import annotations

import json
from pathlib import Path

from thai_grpo.core.io import read_appended_jsonl
from thai_grpo.core.rewards import completion_text
from thai_grpo.methods.metrics import batch_metrics, check_group_order, total_rewards, with_trl_logs
from thai_grpo.methods.objective import group_advantages
from thai_grpo.methods.updates import UPDATES_FILE
from thai_grpo.models.training import last_checkpoint

METRICS_FILE = "step_metrics.jsonl"
ROLLOUTS_FILE = "rollouts.jsonl"  # every completion of every step, as TRL's log_completions table shows them
STEP_FILES = (METRICS_FILE, UPDATES_FILE, ROLLOUTS_FILE)  # JSONL, one line per step (or per completion of a step)


class GroupRecorder:
    """Wraps the reward functions so that every completion's rewards of the last batch are kept.

    Each reward grades ``tokenizer.decode(ids, skip_special_tokens=True)`` of TRL's completion ids: with a
    response template TRL hands over parsed messages instead, which drop an empty ``<think></think>`` (the lenient
    format's hack)."""

    def __init__(self, group_size: int, tokenizer=None):
        self.group_size = group_size
        self.tokenizer = tokenizer
        self.batch: dict = {}

    def texts(self, completions, completion_ids=None) -> list[str]:
        """The completions' texts as the rewards grade them (see the class docstring)."""
        if self.tokenizer is not None and completion_ids is not None:
            return [self.tokenizer.decode(list(ids), skip_special_tokens=True) for ids in completion_ids]
        return [completion_text(c) for c in completions]

    def wrap(self, name: str, function):
        def recorded(prompts, completions, completion_ids=None, **kwargs):
            texts = self.texts(completions, completion_ids)
            values = function(prompts=prompts, completions=texts, completion_ids=completion_ids, **kwargs)
            self.batch.setdefault("rewards", {})[name] = [float(v) for v in values]
            self.batch["prompts"] = [json.dumps(p, ensure_ascii=False) if not isinstance(p, str) else p
                                     for p in prompts]
            self.batch["completions"] = texts
            self.batch["ids"] = list(kwargs.get("id") or [None] * len(texts))
            self.batch["lengths"] = [len(ids) for ids in completion_ids] if completion_ids is not None else \
                [len(t) for t in texts]
            return values

        recorded.__name__ = name
        return recorded

    def take(self) -> dict:
        batch, self.batch = self.batch, {}
        return batch


def rollout_lines(step: int, batch: dict, totals, advantages) -> list[dict]:
    """One line per completion of a step's batch, as TRL's ``log_completions`` table: step, prompt id, completion, each
    reward, their sum and the advantage."""
    return [{"step": step, "prompt_id": prompt_id, "completion": text,
             "rewards": {name: values[i] for name, values in batch["rewards"].items()}, "reward": float(totals[i]),
             "advantage": float(advantages[i])}
            for i, (prompt_id, text) in enumerate(zip(batch["ids"], batch["completions"]))]


def append_lines(path: Path, lines: list[dict]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))


def make_step_logger(recorder: GroupRecorder, metrics_path: Path, scale_by_std: bool = True, advantages=None,
                     updates=None):
    """A TrainerCallback writing each logged step to ``metrics_path`` (with its update flags from ``updates``) and its
    completions to ``rollouts.jsonl`` beside it. ``advantages(totals, G)``: the method's own (default GRPO's)."""
    from transformers import TrainerCallback

    rollouts_path = metrics_path.with_name(ROLLOUTS_FILE)

    class StepLogger(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or ("reward" not in logs and "loss" not in logs):
                return  # not a training step's log (e.g. the run's closing summary)
            flags = {k: v for k, v in (updates.last if updates else {}).items() if k != "step"}
            batch = recorder.take()
            if not batch:  # a reused generation batch (num_iterations > 1): no new rewards, but TRL's clip ratio
                append_lines(metrics_path, [{"step": state.global_step, "reused_batch": True,
                                             **with_trl_logs({}, logs), **flags}])
                return
            check_group_order(batch["prompts"], recorder.group_size)
            metrics = batch_metrics(batch["rewards"], batch["lengths"], recorder.group_size, batch["completions"])
            append_lines(metrics_path, [{"step": state.global_step, **with_trl_logs(metrics, logs), **flags}])
            totals = total_rewards(batch["rewards"])
            own = advantages(totals, recorder.group_size) if advantages else \
                group_advantages(totals, recorder.group_size, scale_by_std=scale_by_std)
            append_lines(rollouts_path, rollout_lines(state.global_step, batch, totals, own))

    return StepLogger()


def read_step_metrics(metrics_path: Path, up_to_step: int | None = None) -> list[dict]:
    """The recorded steps (a last line cut short by a kill is dropped, and its step redone)."""
    return [s for s in read_appended_jsonl(metrics_path) if up_to_step is None or s["step"] <= up_to_step]


def start_step_log(checkpoint_dir: str | Path) -> tuple[Path, str | None]:
    """The step-metrics file and the checkpoint to resume from: None for a fresh start, which empties the step files
    a killed run left; after a resume from checkpoint-N they forget the steps beyond N (they will be redone)."""
    checkpoint_dir = Path(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    resume_from = last_checkpoint(checkpoint_dir)
    step = int(Path(resume_from).name.split("-")[-1]) if resume_from else 0
    for name in STEP_FILES:
        kept = read_step_metrics(checkpoint_dir / name, up_to_step=step) if resume_from else []
        (checkpoint_dir / name).write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in kept),
                                           encoding="utf-8")
    if resume_from:
        print(f"resuming from {Path(resume_from).name} in {checkpoint_dir}", flush=True)
    return checkpoint_dir / METRICS_FILE, resume_from


def epoch_seeded(sampler):
    """TRL's ``RepeatSampler`` made resumable: it seeds its generator once and draws a new permutation each epoch, so
    a run resumed in epoch e would replay epoch 0's order. Here epoch e (from ``set_epoch``) gets the seed's (e+1)-th
    permutation, as in an uninterrupted run; any other sampler is returned unchanged."""
    import torch
    from trl.trainer.utils import RepeatSampler

    if type(sampler) is not RepeatSampler:
        return sampler

    class EpochRepeatSampler(RepeatSampler):
        epoch: int | None = None

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __iter__(self):
            if self.shuffle and self.seed is not None and self.epoch is not None:
                self.generator.manual_seed(self.seed)
                for _ in range(self.epoch):
                    torch.randperm(self.num_samples, generator=self.generator)
            return super().__iter__()

    return EpochRepeatSampler(data_source=sampler.data_source, mini_repeat_count=sampler.mini_repeat_count,
                              batch_size=sampler.batch_size, repeat_count=sampler.repeat_count,
                              shuffle=sampler.shuffle, seed=sampler.seed)


def resumable(trainer_class):
    """``trainer_class`` (GRPOTrainer, RLOOTrainer) with an ``epoch_seeded`` train sampler, so a resumed run sees the
    prompts in the order of the run it continues."""

    class Resumable(trainer_class):
        def _get_train_sampler(self, dataset=None):
            return epoch_seeded(super()._get_train_sampler(dataset))

    Resumable.__name__ = f"Resumable{trainer_class.__name__}"
    return Resumable
