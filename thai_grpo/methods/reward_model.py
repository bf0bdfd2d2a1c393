"""PPO's reward model: TRL's ``RewardTrainer`` (Bradley-Terry) on DPO's verifier-ranked pairs, so at best it imitates
the verifier; each sequence is tokenized as PPO's rollouts and scored at its last real token, where PPO reads it."""

from __future__ import annotations

from pathlib import Path

NO_PAIRS = ("no preference pairs: no training problem had both a correct and a wrong SFT sample, so the reward "
            "model learned nothing (its score head is the random initial one); PPO's score is noise")
REWARD_LOG_KEYS = ("loss", "accuracy", "margin", "learning_rate", "grad_norm")


def pair_ids(tokenizer, pair: dict, chat_template_kwargs: dict | None = None) -> dict:
    """``{chosen_ids, rejected_ids}`` as PPO sees a rollout: chat prompt (+ generation prompt), completion, EOS."""
    prompt = tokenizer.apply_chat_template(pair["prompt"], tokenize=False, add_generation_prompt=True,
                                           **(chat_template_kwargs or {}))
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return {f"{side}_ids": prompt_ids + tokenizer(pair[side][-1]["content"], add_special_tokens=False)["input_ids"]
            + [tokenizer.eos_token_id] for side in ("chosen", "rejected")}


def reward_lora(lora: dict | None = None) -> dict:
    """LoraConfig's arguments: the SFT adapter's rank and targets (``lora``), the score head trained in full."""
    lora = dict(lora or {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0,
                         "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]})
    return {**lora, "task_type": "SEQ_CLS", "modules_to_save": ["score"]}


def load_reward_base(base_dir: str | Path, dtype: str = "float32"):
    """The base as a one-output sequence-classification model; without a config pad id it takes the tokenizer's (as
    RewardTrainer does), so the head pools at the last non-pad token."""
    from transformers import AutoModelForSequenceClassification

    from thai_grpo.core.io import require_model_dir
    from thai_grpo.models.loading import load_tokenizer, resolve_dtype

    require_model_dir(base_dir, "base model")
    model = AutoModelForSequenceClassification.from_pretrained(str(base_dir), num_labels=1, dtype=resolve_dtype(dtype),
                                                               use_safetensors=True, trust_remote_code=False)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = load_tokenizer(base_dir).pad_token_id
    if model.config.pad_token_id is None:
        raise ValueError(f"base model {base_dir} has no pad_token_id in its config.json nor a pad token in its "
                         "tokenizer: the reward head pools at the last non-pad token; set the tokenizer's pad_token")
    return model


def fresh_reward_model(base_dir: str | Path, lora: dict | None, dtype: str = "float32"):
    """The sequence-classification base (in ``dtype``) with a fresh LoRA (``reward_lora``) and score head."""
    from peft import LoraConfig, get_peft_model

    return get_peft_model(load_reward_base(base_dir, dtype), LoraConfig(**reward_lora(lora)))


def token_scores(model, input_ids, attention_mask):
    """The score head on every hidden state: a value model's per-token values, or a reward model's score anywhere."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    backbone = getattr(core, core.base_model_prefix)
    positions = (attention_mask.cumsum(1) - 1).clamp(min=0)
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions).last_hidden_state
    return core.score(hidden).squeeze(-1).float()


def last_token_scores(model, input_ids, attention_mask, prompt_width: int, lengths):
    """A reward model's score of each sequence at its completion's last real token (prompt_width + length - 1)."""
    import torch

    scores = token_scores(model, input_ids, attention_mask)
    rows = torch.arange(input_ids.shape[0], device=scores.device)
    return scores[rows, prompt_width + torch.as_tensor(lengths, device=scores.device) - 1]


def pairwise_accuracy(model, tokenizer, pairs: list[dict], batch_size: int = 64,
                      chat_template_kwargs: dict | None = None) -> dict:
    """Share of pairs whose chosen completion outscores the rejected one (ties wrong) and the mean margin."""
    import torch

    from thai_grpo.models.sampling import right_padded

    margins = []
    encoded = [pair_ids(tokenizer, pair, chat_template_kwargs) for pair in pairs]
    device = next(model.parameters()).device
    with torch.no_grad():
        for start in range(0, len(encoded), batch_size):
            chunk = encoded[start:start + batch_size]
            scores = {}
            for side in ("chosen_ids", "rejected_ids"):
                ids, mask = (tensor.to(device) for tensor in right_padded([row[side] for row in chunk],
                                                                          tokenizer.pad_token_id))
                scores[side] = last_token_scores(model, ids, mask, 0, mask.sum(1))
            margins += (scores["chosen_ids"] - scores["rejected_ids"]).tolist()
    return {"pairs": len(margins), "accuracy": sum(m > 0 for m in margins) / len(margins) if margins else None,
            "mean_margin": sum(margins) / len(margins) if margins else None}


def train_reward_model(base_dir: str | Path, pairs: list[dict], args: dict, lora: dict | None, out_dir: str | Path,
                       checkpoint_dir: str | Path, seed: int, chat_template_kwargs: dict | None, training: dict,
                       dtype: str = "auto") -> dict:
    """Train the reward model on ``pairs`` (frozen base in ``dtype``); save LoRA and score head; return the record."""
    from datasets import Dataset
    from peft import LoraConfig
    from trl import RewardConfig, RewardTrainer

    from thai_grpo.core.io import atomic_directory, read_appended_jsonl
    from thai_grpo.methods.recorder import UPDATES_FILE, recorder, start_step_log, update_counts
    from thai_grpo.models.loading import count_parameters, load_tokenizer, weights_dtype
    from thai_grpo.models.upcast import upcast_trainable
    from thai_grpo.models.training import clear_checkpoints, progress_callback, seed_everything, trainer_args

    seed_everything(seed)
    labels = ("ranked by the verifier (code), not by people: chosen = a correct SFT sample, rejected = a wrong one of "
              "the same training problem")
    if not pairs:  # as DPO: the run goes on and says so; PPO then maximises an untrained (random) score
        print(NO_PAIRS, flush=True)
        model = fresh_reward_model(base_dir, lora, dtype)
        with atomic_directory(out_dir) as tmp:
            model.save_pretrained(tmp, safe_serialization=True)
        return {"pairs": 0, "steps": [], "parameters": count_parameters(model), "args": args,
                "lora": reward_lora(lora), "labels": labels, "skipped": NO_PAIRS, "weights_dtype": weights_dtype(model),
                **update_counts([])}
    tokenizer = load_tokenizer(base_dir)
    rows = [pair_ids(tokenizer, pair, chat_template_kwargs) for pair in pairs]
    config = RewardConfig(**trainer_args(args, checkpoint_dir, seed, dtype, training))
    _, resume_from = start_step_log(checkpoint_dir)
    updates = recorder(checkpoint_dir, "reward_model", training["max_lost_update_share"])
    # The frozen base in base.dtype; the LoRA and the copied score head it trains in float32, before the Trainer
    # builds its optimizer (fp16's loss scaler refuses to unscale float16 gradients).
    trainer = RewardTrainer(model=load_reward_base(base_dir, dtype), args=config,
                            train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                            peft_config=LoraConfig(**reward_lora(lora)),
                            callbacks=[updates, progress_callback(Path(checkpoint_dir).name)])
    upcast_trainable(trainer.model)
    updates.watch(trainer)
    trainer.train(resume_from_checkpoint=resume_from)
    with atomic_directory(out_dir) as tmp:
        trainer.model.save_pretrained(tmp, safe_serialization=True)
    done = read_appended_jsonl(Path(checkpoint_dir) / UPDATES_FILE)
    flags = {record["step"]: {k: v for k, v in record.items() if k != "step"} for record in done}
    clear_checkpoints(checkpoint_dir)
    steps = [{"step": log["step"], **{k: float(log[k]) for k in REWARD_LOG_KEYS if k in log},
              **flags.get(log["step"], {})}
             for log in trainer.state.log_history if "loss" in log]  # a resumed run's history holds the earlier steps
    return {"pairs": len(pairs), "steps": steps, "parameters": count_parameters(trainer.model), "args": args,
            "resolved_args": trainer.args.to_dict(), "lora": reward_lora(lora), "labels": labels,
            "weights_dtype": weights_dtype(trainer.model), **update_counts(done)}
