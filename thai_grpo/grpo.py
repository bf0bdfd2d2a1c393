"""GRPO on the SFT policy with TRL's ``GRPOTrainer``, recording per-step metrics from the groups.

Where this departs from the textbook (DeepSeekMath) algorithm, and why:
- Loss: TRL's, chosen by ``grpo.loss_type`` (``grpo``: per-completion token mean, as in the chapter;
  ``dr_grpo`` with ``scale_rewards: none`` for Dr.GRPO). PPO's clipped surrogate with ``epsilon``.
- Baseline: the group mean; advantages divided by the group std unless ``scale_rewards`` is ``none``.
- KL: k3 per token, weight ``beta``. Reference: with a ready ``PeftModel`` and beta > 0, TRL keeps a
  frozen copy of the starting adapter (adapter ``ref``), so the KL is to the SFT policy (DeepSeekMath's
  definition), not to the bare base with the adapter disabled. No value network, no reward model.
"""

from __future__ import annotations

import json
from pathlib import Path

from thai_grpo.data import grpo_records
from thai_grpo.io import atomic_directory, write_json
from thai_grpo.metrics import batch_metrics, check_group_order, example_groups, total_rewards, with_trl_logs
from thai_grpo.rewards import completion_text, reward_functions
from thai_grpo.training import clear_checkpoints, last_checkpoint, seed_everything, trainer_args

KL_REFERENCE = "frozen copy of the SFT adapter (TRL's 'ref' adapter): the KL is to the SFT policy"
EXAMPLES_FILE = "example_groups.json"


class GroupRecorder:
    """Wraps the reward functions so that every completion's rewards of the last batch are kept."""

    def __init__(self, group_size: int):
        self.group_size = group_size
        self.batch: dict = {}

    def wrap(self, name: str, function):
        def recorded(prompts, completions, completion_ids=None, **kwargs):
            values = function(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
            self.batch.setdefault("rewards", {})[name] = [float(v) for v in values]
            self.batch["prompts"] = [json.dumps(p, ensure_ascii=False) if not isinstance(p, str) else p
                                     for p in prompts]
            self.batch["completions"] = [completion_text(c) for c in completions]
            self.batch["lengths"] = [len(ids) for ids in completion_ids] if completion_ids is not None else \
                [len(t) for t in self.batch["completions"]]
            return values

        recorded.__name__ = name
        return recorded

    def take(self) -> dict:
        batch, self.batch = self.batch, {}
        return batch


def make_step_logger(recorder: GroupRecorder, metrics_path: Path, scale_by_std: bool,
                     examples: dict | None = None):
    """A TrainerCallback that turns each logged step into one line of ``metrics_path`` (JSONL).

    The file sits beside the checkpoints, so metrics of steps done before an interruption survive; so do
    the example groups (``example_groups.json`` beside it), which a resumed run starts from (``examples``).
    """
    from transformers import TrainerCallback

    examples_path = metrics_path.with_name(EXAMPLES_FILE)

    class StepLogger(TrainerCallback):
        def __init__(self):
            self.examples = dict(examples or {})

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "reward" not in logs:
                return
            batch = recorder.take()
            if not batch:
                return  # a reused generation batch (num_iterations > 1) has no new rewards
            check_group_order(batch["prompts"], recorder.group_size)
            metrics = with_trl_logs(batch_metrics(batch["rewards"], batch["lengths"], recorder.group_size), logs)
            metrics = {"step": state.global_step, **metrics}
            with open(metrics_path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(metrics) + "\n")
            for kind, group in example_groups(total_rewards(batch["rewards"]), batch["prompts"],
                                              batch["completions"], recorder.group_size, scale_by_std).items():
                if kind not in self.examples:
                    self.examples[kind] = {"step": state.global_step, **group}
                    write_json(examples_path, self.examples)

    return StepLogger()


def read_step_metrics(metrics_path: Path, up_to_step: int | None = None) -> list[dict]:
    """The recorded steps; a last line cut short by a kill mid-write is dropped (its step is redone)."""
    if not metrics_path.exists():
        return []
    lines = [line for line in metrics_path.read_text().splitlines() if line.strip()]
    steps = []
    for number, line in enumerate(lines, 1):
        try:
            steps.append(json.loads(line))
        except json.JSONDecodeError:
            if number < len(lines):
                raise
    return [s for s in steps if up_to_step is None or s["step"] <= up_to_step]


def _truncate_metrics_to(metrics_path: Path, step: int) -> dict:
    """After a resume from checkpoint-N, forget metrics and example groups of steps beyond N (they will be
    redone); return the example groups kept."""
    kept = read_step_metrics(metrics_path, up_to_step=step)
    metrics_path.write_text("".join(json.dumps(s) + "\n" for s in kept))
    examples_path = metrics_path.with_name(EXAMPLES_FILE)
    examples = json.loads(examples_path.read_text()) if examples_path.exists() else {}
    return {kind: group for kind, group in examples.items() if group["step"] <= step}


def epoch_seeded(sampler):
    """TRL's ``RepeatSampler`` made resumable: epoch e's prompt order no longer depends on where the run started.

    ``RepeatSampler`` seeds its generator once and draws a new permutation each epoch, so a run resumed in
    epoch e would replay epoch 0's order. The returned sampler gives epoch e the (e+1)-th permutation of the
    seed's generator, as in an uninterrupted run; the Trainer announces the epoch through ``set_epoch``.
    Any other sampler is returned unchanged.
    """
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


def resumable_grpo_trainer():
    """``GRPOTrainer`` with an ``epoch_seeded`` train sampler: a resumed run sees the prompts in the same order."""
    from trl import GRPOTrainer

    class ResumableGRPOTrainer(GRPOTrainer):
        def _get_train_sampler(self, dataset=None):
            return epoch_seeded(super()._get_train_sampler(dataset))

    return ResumableGRPOTrainer


def train_grpo(base_dir: str | Path, adapter_dir: str | Path, rows: list[dict], grpo_args: dict,
               reward_names: list[str], system_prompt: str, out_dir: str | Path, checkpoint_dir: str | Path,
               seed: int) -> dict:
    """Run GRPO from the SFT adapter; save the trained adapter; return per-step metrics and example groups."""
    from datasets import Dataset
    from trl import GRPOConfig

    from thai_grpo.models import count_parameters, load_policy, load_tokenizer

    checkpoint_dir = Path(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    metrics_path = checkpoint_dir / "step_metrics.jsonl"
    resume_from = last_checkpoint(checkpoint_dir)
    examples = {}
    if resume_from is None:
        metrics_path.unlink(missing_ok=True)
        metrics_path.with_name(EXAMPLES_FILE).unlink(missing_ok=True)
    else:
        print(f"resuming from {Path(resume_from).name} in {checkpoint_dir}", flush=True)
        examples = _truncate_metrics_to(metrics_path, int(Path(resume_from).name.split("-")[-1]))

    seed_everything(seed)
    config = GRPOConfig(**trainer_args(grpo_args, checkpoint_dir, seed))
    tokenizer = load_tokenizer(base_dir)
    model = load_policy(base_dir, adapter_dir, trainable=True)
    recorder = GroupRecorder(config.num_generations)
    funcs = [recorder.wrap(name, f) for name, f in zip(reward_names, reward_functions(reward_names))]
    logger = make_step_logger(recorder, metrics_path, scale_by_std=config.scale_rewards != "none",
                              examples=examples)
    trainer_class = resumable_grpo_trainer()
    trainer = trainer_class(model=model, reward_funcs=funcs, args=config, processing_class=tokenizer,
                            train_dataset=Dataset.from_list(grpo_records(rows, system_prompt)), callbacks=[logger])
    trainer.train(resume_from_checkpoint=resume_from)

    with atomic_directory(out_dir) as tmp:
        trainer.model.save_pretrained(tmp, selected_adapters=["default"], safe_serialization=True)
    result = {"steps": read_step_metrics(metrics_path), "example_groups": logger.examples,
              "parameters": count_parameters(trainer.model), "kl_reference": KL_REFERENCE,
              "trl_log_history": trainer.state.log_history}
    clear_checkpoints(checkpoint_dir)
    return result
