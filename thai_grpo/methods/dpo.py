"""DPO (Rafailov et al. 2023, TRL's ``sigmoid`` loss) on preference pairs sampled once from the SFT policy, which is
the reference whatever ``grpo.reference``; beta scales the implicit reward, it is not a KL weight."""

from __future__ import annotations

import shutil
from pathlib import Path

from thai_grpo.core.config import ConfigError

KL_REFERENCE = ("the SFT policy, by DPO's definition (TRL's frozen 'ref' copy of the SFT adapter, whatever "
                "grpo.reference): DPO's implicit reward is beta x log(pi/pi_ref)")
TOKEN_COLUMNS = ("prompt_ids", "chosen_ids", "rejected_ids")
DPO_LOG_KEYS = {"loss": "loss", "rewards/margins": "reward_margin", "rewards/accuracies": "reward_accuracy",
                "rewards/chosen": "reward_chosen", "rewards/rejected": "reward_rejected", "logps/chosen": "logp_chosen",
                "logps/rejected": "logp_rejected", "learning_rate": "learning_rate", "grad_norm": "grad_norm"}
NO_PAIRS = ("no preference pairs: no training problem had both a correct and a wrong SFT sample, so DPO had "
            "nothing to rank; the adapter is the SFT adapter unchanged")


def check_max_length(max_length: int | None, longest_prompt: int, completion_budget: int, where: str) -> None:
    """Refuse a DPO ``max_length`` (None: no limit) below the longest prompt plus the completion budget: TRL's
    collator would cut the ends of the longest answers, the very tokens that decide a pair."""
    if max_length is not None and max_length < longest_prompt + completion_budget:
        raise ConfigError(f"{where}max_length={max_length} is shorter than the longest prompt ({longest_prompt} "
                          f"tokens) plus the completion budget ({completion_budget}): TRL would cut the answers; "
                          f"set it to at least {longest_prompt + completion_budget}")


def token_rows(pairs: list[dict]) -> list[dict]:
    """DPOTrainer's rows: each pair's stored ids (``TOKEN_COLUMNS``)."""
    return [{key: list(pair[key]) for key in TOKEN_COLUMNS} for pair in pairs]


def sampled_token_trainer():
    """TRL's DPOTrainer keeping the rows' token ids as sampled: its ``_prepare_dataset`` re-renders them through the
    chat template, which gives a completion cut at the budget an empty think block and an end-of-turn never written."""
    from trl import DPOTrainer

    class SampledTokenDPOTrainer(DPOTrainer):

        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            return dataset.select_columns(list(TOKEN_COLUMNS))

    return SampledTokenDPOTrainer


def dpo_step(logs: dict, step: int) -> dict | None:
    """One step record from TRL's DPO log in our names (``DPO_LOG_KEYS``); None for the end-of-training summary."""
    if "rewards/margins" not in logs:
        return None
    return {"step": step, **{ours: float(logs[theirs]) for theirs, ours in DPO_LOG_KEYS.items() if theirs in logs}}


def make_dpo_logger(metrics_path: Path, updates):
    """A TrainerCallback appending each logged DPO step, with its update flags from ``updates``, to ``metrics_path``."""
    from transformers import TrainerCallback

    from thai_grpo.methods.recorder import append_lines

    class DPOStepLogger(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            record = dpo_step(logs or {}, state.global_step)
            if record is not None:
                append_lines(metrics_path, [{**record, **{k: v for k, v in updates.last.items() if k != "step"}}])

    return DPOStepLogger()


def train(spec) -> dict:
    """Run DPO from the SFT adapter on ``spec.pairs``; save the adapter (unchanged without pairs); return the record."""
    from datasets import Dataset
    from trl import DPOConfig

    from thai_grpo.core.io import atomic_directory, read_appended_jsonl, write_jsonl
    from thai_grpo.methods.recorder import UPDATES_FILE, read_step_metrics, recorder, start_step_log, update_counts
    from thai_grpo.models.loading import count_parameters, load_policy, load_tokenizer, weights_dtype
    from thai_grpo.models.training import clear_checkpoints, progress_callback, seed_everything, trainer_args

    pairs, checkpoint_dir = spec.pairs, spec.checkpoint_dir
    args = {**spec.plan["grpo_args"], **spec.plan["dpo"]}  # grpo_args: what DPO inherits (methods.method_grpo_args)
    base = {"method": "dpo", "kl_reference": KL_REFERENCE, "num_pairs": len(pairs), "args": args}
    if spec.rollouts is not None:
        write_jsonl(spec.rollouts, [])
    if not pairs:
        print(NO_PAIRS, flush=True)
        with atomic_directory(spec.out_dir) as tmp:
            shutil.copytree(spec.adapter_dir, tmp, dirs_exist_ok=True)
        model = load_policy(spec.base_dir, spec.adapter_dir, trainable=True, dtype=spec.dtype)
        return {**base, "steps": [], "parameters": count_parameters(model), "skipped": NO_PAIRS,
                "weights_dtype": weights_dtype(model), **update_counts([])}

    rows = token_rows(pairs)
    config = DPOConfig(**trainer_args(args, checkpoint_dir, spec.seed, spec.dtype, spec.training))
    check_max_length(config.max_length, max(len(pair["prompt_ids"]) for pair in pairs),
                     max(pair["completion_budget"] for pair in pairs), "the DPO variant's dpo.")
    metrics_path, resume_from = start_step_log(checkpoint_dir)
    seed_everything(spec.seed)
    tokenizer = load_tokenizer(spec.base_dir)
    model = load_policy(spec.base_dir, spec.adapter_dir, trainable=True, dtype=spec.dtype)  # the LoRA in float32
    updates = recorder(checkpoint_dir, spec.run, spec.training["max_lost_update_share"])
    trainer = sampled_token_trainer()(model=model, ref_model=None, args=config, train_dataset=Dataset.from_list(rows),
                                      processing_class=tokenizer,
                                      callbacks=[updates, make_dpo_logger(metrics_path, updates),
                                                 progress_callback(Path(checkpoint_dir).name)])
    updates.watch(trainer)
    trainer.train(resume_from_checkpoint=resume_from)

    with atomic_directory(spec.out_dir) as tmp:
        trainer.model.save_pretrained(tmp, selected_adapters=["default"], safe_serialization=True)
    result = {**base, "steps": read_step_metrics(metrics_path), "parameters": count_parameters(trainer.model),
              "resolved_args": trainer.args.to_dict(), "optimizer_steps": trainer.state.max_steps,
              "trl_log_history": trainer.state.log_history, "weights_dtype": weights_dtype(trainer.model),
              **update_counts(read_appended_jsonl(metrics_path.with_name(UPDATES_FILE)))}
    clear_checkpoints(checkpoint_dir)
    return result
