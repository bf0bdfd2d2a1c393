"""DPO (Rafailov et al. 2023) with TRL's ``DPOTrainer`` on preference pairs from the SFT policy's own samples.

Same SFT adapter and the same training problems as GRPO, but no sampling while training: the pairs
(``thai_grpo.methods.preferences``: chosen = a correct completion, rejected = a wrong one of the same problem) are
built once, before training, and never refreshed. Where it departs from GRPO:
- Loss: -log sigmoid(beta * [(log pi(y_w|x) - log pi_ref(y_w|x)) - (log pi(y_l|x) - log pi_ref(y_l|x))]),
  TRL's ``sigmoid`` loss; ``beta`` here scales the implicit reward, it is not a KL weight.
- No reward function and no advantage: the verifier only ranked the pairs. DPO can only rank answers that
  exist in the file, so problems the SFT policy never (or always) solves teach it nothing.
- Reference: the frozen copy of the SFT adapter (TRL's ``ref`` adapter; ``ref_model=None`` with a PeftModel).
Per step it records TRL's log: loss, rewards/margins, rewards/accuracies (share of pairs ranked right).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from thai_grpo.core.config import inherited_args

KL_REFERENCE = "frozen copy of the SFT adapter (TRL's 'ref' adapter): DPO's implicit reward is beta x log(pi/pi_ref)"
# Shared names whose meaning differs: GRPO's beta is a KL weight and its loss_type a policy-gradient loss;
# its per_device_train_batch_size counts completions, DPO's counts pairs. And the length and schedule of training:
# GRPO's steps count rollout batches, not passes over DPO's pairs, so DPO takes TRL's (one epoch, linear decay)
# unless its own dpo: section sets them.
SCHEDULE = ("max_steps", "num_train_epochs", "gradient_accumulation_steps", "learning_rate", "lr_scheduler_type",
            "warmup_steps", "warmup_ratio")
NOT_INHERITED = ("beta", "loss_type", "per_device_train_batch_size", *SCHEDULE)
DPO_LOG_KEYS = {
    "loss": "loss",
    "rewards/margins": "reward_margin",
    "rewards/accuracies": "reward_accuracy",
    "rewards/chosen": "reward_chosen",
    "rewards/rejected": "reward_rejected",
    "logps/chosen": "logp_chosen",
    "logps/rejected": "logp_rejected",
    "learning_rate": "learning_rate",
    "grad_norm": "grad_norm",
}
NO_PAIRS = ("no preference pairs: no training problem had both a correct and a wrong SFT sample, so DPO had "
            "nothing to rank; the adapter is the SFT adapter unchanged")


def dpo_args(grpo_args: dict, dpo_fields, overrides: dict | None = None) -> tuple[dict, list[str]]:
    """DPOConfig's arguments: the bookkeeping fields of a merged ``grpo`` section (logging, checkpoints, activation
    checkpointing, ...), not ``NOT_INHERITED`` (the meaning differs, or the length and schedule of training), then the
    variant's ``dpo:`` overrides."""
    kept, dropped = inherited_args(grpo_args, dpo_fields, exclude=NOT_INHERITED)
    return {**kept, **(overrides or {})}, dropped


def dpo_step(logs: dict, step: int) -> dict | None:
    """One step record from TRL's DPO log (our names, see ``DPO_LOG_KEYS``); None for a log without
    ``rewards/margins`` (the end-of-training summary)."""
    if "rewards/margins" not in logs:
        return None
    return {"step": step, **{ours: float(logs[theirs]) for theirs, ours in DPO_LOG_KEYS.items() if theirs in logs}}


def make_dpo_logger(metrics_path: Path):
    """A TrainerCallback appending each logged DPO step to ``metrics_path`` (JSONL, beside the checkpoints)."""
    from transformers import TrainerCallback

    class DPOStepLogger(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            record = dpo_step(logs or {}, state.global_step)
            if record is not None:
                with open(metrics_path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record) + "\n")

    return DPOStepLogger()


def train_dpo(base_dir: str | Path, adapter_dir: str | Path, pairs: list[dict], grpo_args: dict,
              overrides: dict | None, out_dir: str | Path, checkpoint_dir: str | Path, seed: int,
              dtype: str = "auto") -> dict:
    """Run DPO from the SFT adapter on ``pairs``; save the adapter; return per-step metrics.

    Without pairs nothing can be trained: the SFT adapter is saved unchanged and the result says why.
    """
    import dataclasses

    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    from thai_grpo.core.io import atomic_directory
    from thai_grpo.methods.grpo import read_step_metrics, start_step_log
    from thai_grpo.models.loading import count_parameters, load_policy, load_tokenizer, weights_dtype
    from thai_grpo.models.training import clear_checkpoints, progress_callback, seed_everything, trainer_args

    args, dropped = dpo_args(grpo_args, {f.name for f in dataclasses.fields(DPOConfig)}, overrides)
    base = {"method": "dpo", "kl_reference": KL_REFERENCE, "num_pairs": len(pairs), "args": args,
            "dropped_grpo_fields": dropped}
    if not pairs:
        print(NO_PAIRS, flush=True)
        with atomic_directory(out_dir) as tmp:
            shutil.copytree(adapter_dir, tmp, dirs_exist_ok=True)
        model = load_policy(base_dir, adapter_dir, trainable=True, dtype=dtype)
        return {**base, "steps": [], "parameters": count_parameters(model), "skipped": NO_PAIRS,
                "weights_dtype": weights_dtype(model)}

    metrics_path, resume_from, _, _ = start_step_log(checkpoint_dir)
    seed_everything(seed)
    config = DPOConfig(**trainer_args(args, checkpoint_dir, seed))
    tokenizer = load_tokenizer(base_dir)
    model = load_policy(base_dir, adapter_dir, trainable=True, dtype=dtype)  # base.dtype; the LoRA in float32
    rows = [{key: pair[key] for key in ("prompt", "chosen", "rejected")} for pair in pairs]
    trainer = DPOTrainer(model=model, ref_model=None, args=config, train_dataset=Dataset.from_list(rows),
                         processing_class=tokenizer,
                         callbacks=[make_dpo_logger(metrics_path), progress_callback(Path(checkpoint_dir).name)])
    trainer.train(resume_from_checkpoint=resume_from)

    with atomic_directory(out_dir) as tmp:
        trainer.model.save_pretrained(tmp, selected_adapters=["default"], safe_serialization=True)
    result = {**base, "steps": read_step_metrics(metrics_path), "parameters": count_parameters(trainer.model),
              "resolved_args": trainer.args.to_dict(), "optimizer_steps": trainer.state.max_steps,
              "trl_log_history": trainer.state.log_history, "weights_dtype": weights_dtype(trainer.model)}
    clear_checkpoints(checkpoint_dir)
    return result
