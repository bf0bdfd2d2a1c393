"""GRPO with TRL's ``GRPOTrainer``: G completions per prompt graded by code, the group mean as baseline, no critic.

Where it departs from the textbook (DeepSeekMath) algorithm, by config:
- loss: TRL's ``grpo.loss_type`` (``grpo``: per-completion token mean, the chapter's; ``dr_grpo`` with
  ``scale_rewards: none`` for Dr.GRPO), PPO's clipped surrogate with ``epsilon``;
- KL: k3 per token weighted by ``beta``; the chapter's plain k3 needs ``use_bias_correction_kl: false`` (TRL 1.16's
  default multiplies it by the importance ratio); reference ``base`` (adapter disabled) or ``sft`` (a frozen copy).
The loss written out as the chapter writes it is ``thai_grpo.methods.objective``; RLOO runs this loop too.
"""

from __future__ import annotations

import functools

import numpy as np

from thai_grpo.core.io import atomic_directory, read_appended_jsonl, write_jsonl
from thai_grpo.core.references import KL_REFERENCES, NO_KL
from thai_grpo.core.rewards import reward_functions
from thai_grpo.data.prompts import grpo_records
from thai_grpo.methods.recorder import (METRICS_FILE, ROLLOUTS_FILE, UPDATES_FILE, read_step_metrics, recorder,
                                       start_step_log, update_counts)
from thai_grpo.models.training import (clear_checkpoints, progress_callback, resume_in_order, seed_everything,
                                       trainer_args)

STD_EPS = 1e-4  # TRL's, added to the group std so that an all-equal group divides 0 by a non-zero number


def group_advantages(rewards, group_size: int, scale_by_std: bool = True, eps: float = STD_EPS):
    """A_i = (r_i - mean_g) / (std_g + eps) per group of ``group_size`` consecutive rewards (sample std), flat;
    Dr.GRPO's ``scale_by_std=False``: r_i - mean_g. A tensor gives a tensor, an array or list float64 numpy."""
    import torch

    if not isinstance(rewards, torch.Tensor):
        as_tensor = torch.as_tensor(np.asarray(rewards, dtype=np.float64))
        return group_advantages(as_tensor, group_size, scale_by_std, eps).numpy()
    if group_size < 2 or rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size} (G >= 2)")
    groups = rewards.reshape(-1, group_size)
    centered = groups - groups.mean(dim=1, keepdim=True)
    if scale_by_std:
        centered = centered / (groups.std(dim=1, keepdim=True) + eps)
    return centered.reshape(-1)


def use_reference(trainer, reference: str) -> str:
    """Point the trainer's KL at ``grpo.reference`` and describe it: TRL 1.16 scores with a frozen ``ref`` copy of the
    starting adapter where one exists, else with the adapters disabled, so ``base`` deletes the copy."""
    if not trainer.beta:
        return NO_KL
    model = trainer.accelerator.unwrap_model(trainer.model)
    if reference == "base" and "ref" in model.peft_config:
        model.delete_adapter("ref")
    return KL_REFERENCES[reference]["trl"]


def rollout_trainer(trainer_class, config_class, args: dict, spec, advantages=None):
    """(trainer, checkpoint to resume from or None, KL reference's words): a GRPO-family trainer for ``spec`` with its
    recorder and, on a CPU, the CPU speed-ups; ``advantages(totals, G)``: the method's (default GRPO's)."""
    from datasets import Dataset

    from thai_grpo.models.loading import load_policy, load_tokenizer

    _, resume_from = start_step_log(spec.checkpoint_dir)
    seed_everything(spec.seed)
    config = config_class(**trainer_args(args, spec.checkpoint_dir, spec.seed, spec.dtype, spec.training))
    if advantages is None:  # GRPO's; Dr.GRPO's scale_rewards: none does not divide by the std
        advantages = functools.partial(group_advantages, scale_by_std=args["scale_rewards"] not in ("none", False))
    tokenizer = load_tokenizer(spec.base_dir)
    model = load_policy(spec.base_dir, spec.adapter_dir, trainable=True, dtype=spec.dtype)
    record = recorder(spec.checkpoint_dir, spec.run, spec.training["max_lost_update_share"], config.num_generations,
                      tokenizer, advantages)
    names = spec.plan["rewards"]
    rewards = [record.wrap(name, function) for name, function in zip(names, reward_functions(names))]
    trainer = trainer_class(model=model, reward_funcs=rewards, args=config, processing_class=tokenizer,
                            train_dataset=Dataset.from_list(grpo_records(spec.train_rows, spec.system_prompt)),
                            callbacks=[record, progress_callback(spec.checkpoint_dir.name)])
    record.watch(resume_in_order(trainer))
    kl_reference = use_reference(trainer, args["reference"])
    if trainer.accelerator.device.type == "cpu":
        from thai_grpo.models.cpu import share_prompts

        share_prompts(trainer)
    return trainer, resume_from, kl_reference


def train_with_rollouts(trainer_class, config_class, args: dict, spec, kl_note: str = "", advantages=None) -> dict:
    """Train a GRPO-family run (``rollout_trainer``), save its adapter and rollouts, return its record; ``kl_note``: how
    the method uses the KL."""
    from thai_grpo.models.loading import count_parameters, weights_dtype

    trainer, resume_from, kl_reference = rollout_trainer(trainer_class, config_class, args, spec, advantages)
    trainer.train(resume_from_checkpoint=resume_from)
    with atomic_directory(spec.out_dir) as tmp:
        trainer.model.save_pretrained(tmp, selected_adapters=["default"], safe_serialization=True)
    if spec.rollouts is not None:
        write_jsonl(spec.rollouts, read_appended_jsonl(spec.checkpoint_dir / ROLLOUTS_FILE))
    result = {"steps": read_step_metrics(spec.checkpoint_dir / METRICS_FILE), "system_prompt": spec.system_prompt,
              "parameters": count_parameters(trainer.model),
              "kl_reference": f"{kl_reference}; {kl_note}" if kl_note else kl_reference, "args": args,
              "resolved_args": trainer.args.to_dict(), "reference": args["reference"],
              "optimizer_steps": trainer.state.max_steps, "trl_log_history": trainer.state.log_history,
              "weights_dtype": weights_dtype(trainer.model),
              **update_counts(read_appended_jsonl(spec.checkpoint_dir / UPDATES_FILE))}
    clear_checkpoints(spec.checkpoint_dir)
    return result


def train(spec) -> dict:
    """GRPO from the SFT adapter (``spec.plan["grpo_args"]``: GRPOConfig fields by name); returns the run's record."""
    from trl import GRPOConfig, GRPOTrainer

    return {"method": "grpo", **train_with_rollouts(GRPOTrainer, GRPOConfig, spec.plan["grpo_args"], spec)}
