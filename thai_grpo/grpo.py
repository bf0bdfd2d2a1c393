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
from thai_grpo.io import atomic_directory
from thai_grpo.metrics import batch_metrics, check_group_order, example_groups, total_rewards, with_trl_logs
from thai_grpo.rewards import completion_text, reward_functions
from thai_grpo.training import clear_checkpoints, last_checkpoint, seed_everything, trainer_args

KL_REFERENCE = "frozen copy of the SFT adapter (TRL's 'ref' adapter): the KL is to the SFT policy"


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


def make_step_logger(recorder: GroupRecorder, metrics_path: Path, scale_by_std: bool):
    """A TrainerCallback that turns each logged step into one line of ``metrics_path`` (JSONL).

    The file sits beside the checkpoints, so metrics of steps done before an interruption survive.
    """
    from transformers import TrainerCallback

    class StepLogger(TrainerCallback):
        examples: dict = {}

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
                self.examples.setdefault(kind, {"step": state.global_step, **group})

    return StepLogger()


def read_step_metrics(metrics_path: Path, up_to_step: int | None = None) -> list[dict]:
    if not metrics_path.exists():
        return []
    steps = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    return [s for s in steps if up_to_step is None or s["step"] <= up_to_step]


def _truncate_metrics_to(metrics_path: Path, step: int) -> None:
    """After a resume from checkpoint-N, forget metrics of steps beyond N (they will be redone)."""
    kept = read_step_metrics(metrics_path, up_to_step=step)
    metrics_path.write_text("".join(json.dumps(s) + "\n" for s in kept))


def train_grpo(base_dir: str | Path, adapter_dir: str | Path, rows: list[dict], grpo_args: dict,
               reward_names: list[str], system_prompt: str, out_dir: str | Path, checkpoint_dir: str | Path,
               seed: int) -> dict:
    """Run GRPO from the SFT adapter; save the trained adapter; return per-step metrics and example groups."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from thai_grpo.models import count_parameters, load_policy, load_tokenizer

    checkpoint_dir = Path(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    metrics_path = checkpoint_dir / "step_metrics.jsonl"
    resume_from = last_checkpoint(checkpoint_dir)
    if resume_from is None:
        metrics_path.unlink(missing_ok=True)
    else:
        _truncate_metrics_to(metrics_path, int(Path(resume_from).name.split("-")[-1]))

    seed_everything(seed)
    config = GRPOConfig(**trainer_args(grpo_args, checkpoint_dir, seed))
    tokenizer = load_tokenizer(base_dir)
    model = load_policy(base_dir, adapter_dir, trainable=True)
    recorder = GroupRecorder(config.num_generations)
    funcs = [recorder.wrap(name, f) for name, f in zip(reward_names, reward_functions(reward_names))]
    logger = make_step_logger(recorder, metrics_path, scale_by_std=config.scale_rewards != "none")
    trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=config, processing_class=tokenizer,
                          train_dataset=Dataset.from_list(grpo_records(rows, system_prompt)), callbacks=[logger])
    trainer.train(resume_from_checkpoint=resume_from)

    with atomic_directory(out_dir) as tmp:
        trainer.model.save_pretrained(tmp, selected_adapters=["default"], safe_serialization=True)
    result = {"steps": read_step_metrics(metrics_path), "example_groups": logger.examples,
              "parameters": count_parameters(trainer.model), "kl_reference": KL_REFERENCE,
              "trl_log_history": trainer.state.log_history}
    clear_checkpoints(checkpoint_dir)
    return result
