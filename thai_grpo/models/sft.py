"""Supervised stages of the offline default: pretrain the tiny base from scratch, then train the SFT LoRA (TRL's
``SFTTrainer``, loss on the assistant turn only)."""

from __future__ import annotations

from pathlib import Path

from thai_grpo.core.io import atomic_directory
from thai_grpo.models.training import clear_checkpoints, progress_callback, resume_point, seed_everything, trainer_args


def language_modelling_dataset(texts: list[str], tokenizer, max_length: int | None):
    """Token ids of each text with EOS appended, cut at ``max_length`` (as TRL's SFTTrainer prepares ``text``)."""
    from datasets import Dataset

    dataset = Dataset.from_dict({"text": [text + tokenizer.eos_token for text in texts]})
    return dataset.map(lambda batch: tokenizer(batch["text"], truncation=max_length is not None, max_length=max_length),
                       batched=True, remove_columns=["text"])


def pretrain_base(texts: list[str], tokenizer, architecture: dict, args: dict, out_dir: str | Path,
                  checkpoint_dir: str | Path, seed: int) -> list[dict]:
    """Train a tiny Qwen3 from scratch on plain problem-and-solution text; save model and tokenizer. transformers'
    ``Trainer``, not TRL's ``SFTTrainer``: the same loss without a fused LM-head kernel made for large vocabularies."""
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

    from thai_grpo.models.tiny_base import build_tiny_qwen3

    args = dict(args)
    dataset = language_modelling_dataset(texts, tokenizer, args.pop("max_length", None))
    seed_everything(seed)
    model = build_tiny_qwen3(tokenizer, seed=seed, **architecture)
    checkpoint_dir = Path(checkpoint_dir)
    # the model is built in float32: trained in float32 (no autocast), whatever the machine
    trainer = Trainer(model=model, args=TrainingArguments(**trainer_args(args, checkpoint_dir, seed, "float32")),
                      train_dataset=dataset, data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
                      callbacks=[progress_callback(checkpoint_dir.name)])
    trainer.train(resume_from_checkpoint=resume_point(checkpoint_dir))
    with atomic_directory(out_dir) as tmp:
        trainer.model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
    clear_checkpoints(checkpoint_dir)
    return trainer.state.log_history


def train_sft_adapter(base_dir: str | Path, records: list[dict], lora: dict, args: dict, out_dir: str | Path,
                      checkpoint_dir: str | Path, seed: int, dtype: str = "float32") -> list[dict]:
    """Train a LoRA adapter on the prompt-completion records, the frozen base in ``dtype``; save only the adapter."""
    from datasets import Dataset
    from peft import LoraConfig
    from trl import SFTConfig, SFTTrainer

    from thai_grpo.models.loading import load_base_model, load_tokenizer

    checkpoint_dir = Path(checkpoint_dir)
    tokenizer = load_tokenizer(base_dir)
    model = load_base_model(base_dir, dtype)
    seed_everything(seed)
    config = SFTConfig(**trainer_args(args, checkpoint_dir, seed, dtype))
    trainer = SFTTrainer(model=model, args=config, train_dataset=Dataset.from_list(records),
                         processing_class=tokenizer, peft_config=LoraConfig(task_type="CAUSAL_LM", **lora),
                         callbacks=[progress_callback(checkpoint_dir.name)])
    if len(trainer.train_dataset) == 0:
        raise ValueError(f"all {len(records)} training examples were dropped: their prompts fill max_length="
                         f"{config.max_length} tokens, leaving no target to learn; raise max_length")
    trainer.train(resume_from_checkpoint=resume_point(checkpoint_dir))
    with atomic_directory(out_dir) as tmp:
        trainer.model.save_pretrained(tmp, safe_serialization=True)
    clear_checkpoints(checkpoint_dir)
    return trainer.state.log_history
