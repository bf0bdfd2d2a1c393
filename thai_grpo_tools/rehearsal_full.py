"""Qwen3-0.6B at full size through every stage, without its weights: the pieces ``tools/rehearse_full.py`` puts
together (``make rehearse-full`` on a CPU, ``make gpu-check`` on a GPU).

The model is the published architecture (``rehearsal.QWEN3_0_6B_CONFIG``: 28 layers, hidden 1024, intermediate 3072,
16 heads, 8 KV heads, head_dim 128, the 151,936-token tied vocabulary) with random weights built here, saved in
bfloat16 as the hub's; the tokenizer is the stand-in's (``rehearsal.standin_tokenizer``: Qwen3's added tokens at their
ids, Qwen3's chat template); the SFT adapter is the hub adapter's shape (r 16 on the attention projections, dropout
0.05). Random weights sample near-uniformly over the vocabulary, so completions run to the full budget (the most
memory) and never earn a reward; DPO's and the reward model's pairs are written here (a correct and a wrong answer
per problem), since a random policy yields none.

Sizes (``PRESETS``) are overrides merged on top of the real config, as ``--configfile`` merges them: ``cpu`` shrinks
rows and lengths so that every stage takes one or two optimizer steps in minutes on 2 cores; ``chapter`` keeps the
chapter's batch sizes and lengths and only stops each trainer after one optimizer step (the grpo variant after three).
The memory plan predicts at exactly the merged sizes (``plans``), so each stage's measured peak is compared with its own prediction.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from thai_grpo.jobs.memory_stages import CARD_GIB, CPU, T4, Precision
from thai_grpo_tools.stage_plans import sized_config, sizes_for_card, stage_plans

STEP = {"max_steps": 1, "save_steps": 1000}  # one optimizer step; no checkpoint written mid-run
PRESETS = {
    "cpu": {
        "grpo": {"per_device_train_batch_size": 4, "num_generations": 4, "gradient_accumulation_steps": 1,
                 "max_completion_length": 16, **STEP},
        "reward_model": {"args": {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 1,
                                  "max_length": 512, **STEP}},
        "variants": {"dpo": {"dpo": {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 1, **STEP}},
                     "ppo": {"ppo": {"batch_size": 4, "max_steps": 1, "num_ppo_epochs": 1, "num_mini_batches": 1}},
                     "ppo_verifier": {"ppo": {"batch_size": 4, "max_steps": 1, "num_ppo_epochs": 1,
                                              "num_mini_batches": 1}}},
        "eval": {"num_samples": 2, "batch_size": 2, "max_new_tokens": 16, "ks": [1, 2]},
    },
    "chapter": {
        "grpo": STEP, "reward_model": {"args": STEP},
        "variants": {"grpo": {"grpo": {"max_steps": 3}},  # float16's loss scale calibrates on its first steps
                     "dpo": {"dpo": STEP}, "ppo": {"ppo": {"max_steps": 1}},
                     "ppo_verifier": {"ppo": {"max_steps": 1}}},
    },
}
# Each stage: the trainer or pass it runs, and the plan stages it is measured against (the largest of them).
STAGES = {"grpo": ("GRPO full: train step", "GRPO full: rollouts"),
          "grpo_fast": ("GRPO fast: train step", "GRPO fast: rollouts"),
          "rloo": ("GRPO full: train step", "GRPO full: rollouts"),
          "dpo": ("DPO (dpo): train step",), "reward_model": ("reward model: train step",),
          "ppo": ("PPO (ppo): rollouts", "PPO (ppo): update"),
          "ppo_verifier": ("PPO (ppo_verifier): rollouts", "PPO (ppo_verifier): update"),
          "sample": ("held-out sampling",), "decode_stops": ("held-out sampling",),
          "token_logprobs": ("token log-probs (k1 vs k3)",),
          "vllm_sample": ()}
CPU_STAGES = ("grpo", "rloo", "dpo", "reward_model", "ppo", "ppo_verifier", "sample", "token_logprobs")
GPU_STAGES = ("grpo", "grpo_fast", "rloo", "dpo", "reward_model", "ppo", "ppo_verifier", "sample", "decode_stops",
              "token_logprobs")
TRAINING_STAGES = ("grpo", "grpo_fast", "rloo", "dpo", "reward_model", "ppo", "ppo_verifier")
# make gpu-check's passes: name -> (dtype, the memory each stage may allocate in GiB or None, stages). Held-out
# sampling, its decode loop and the token log-probs compute in float32 (eval.dtype) whatever the training dtype, so the
# bfloat16 pass only trains; within a T4's memory run the stages whose sizes the card decides and the trainers a T4
# must hold (ppo_verifier is ppo with smaller passes).
GPU_CHECK_PASSES = {"float16": ("float16", None, GPU_STAGES), "bfloat16": ("bfloat16", None, TRAINING_STAGES),
                    "auto": ("auto", None, GPU_STAGES),  # a card older than a T4: the dtype the pipeline picks
                    "float16-t4": ("float16", CARD_GIB, ("grpo", "dpo", "reward_model", "ppo", "sample",
                                                         "decode_stops"))}


def deep_merge(base: dict, top: dict) -> dict:
    return {**base, **{key: deep_merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict)
                       else value for key, value in top.items()}}


# A rehearsal records a lost update (training.max_lost_update_share) instead of stopping the stage at it.
RECORD_LOST_UPDATES = {"training": {"max_lost_update_share": 1.0, "report_to": "none"}}


def rehearsal_config(real: dict, preset: str, card_gib: float = CARD_GIB) -> dict:
    """The merged real config (config.yaml + qwen3-0.6b.yaml) with a preset's sizes on top, ``auto`` sizes as a card
    of ``card_gib`` chooses them (the card the rehearsal runs on; a T4's on a CPU), lost updates recorded."""
    if preset not in PRESETS:
        raise ValueError(f"preset {preset!r}: use one of {', '.join(PRESETS)}")
    config = deep_merge(deep_merge(real, PRESETS[preset]), RECORD_LOST_UPDATES)
    return sized_config(config, sizes_for_card(config, card_gib))


def problem_count(config: dict) -> tuple[int, int]:
    """(training rows, held-out rows) a preset needs: one GRPO generation batch of prompts or PPO's rollout batch,
    whichever is larger; one generate call of held-out problems."""
    grpo = config["grpo"]
    prompts = grpo["per_device_train_batch_size"] * grpo.get("gradient_accumulation_steps", 1) // grpo[
        "num_generations"]
    ppo = max(v.get("ppo", {}).get("batch_size", 0) for v in config["variants"].values())
    return max(prompts, ppo, 2), int(config["eval"]["batch_size"])


def training_rows(count: int, seed: int = 3) -> list[dict]:
    """Rows as the split writes them (``id``, ``question``, integer ``answer``): synthetic Thai problems."""
    from thai_grpo.data.synthetic import generate_problems

    return [{"id": f"p{i}", "question": row["translated_question"], "answer": int(row["answer"])}
            for i, row in enumerate(generate_problems(count, seed=seed, max_operand=9))]


def cached_real_weights(config: dict, cache_dir: str | Path | None = None) -> dict | None:
    """The real base and SFT adapter (``base.name_or_path``, ``sft.name_or_path`` at their revisions) where the local
    hub cache (``cache_dir``; default huggingface_hub's) holds both: their snapshot folders, nothing downloaded; else
    None."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    from thai_grpo.core.hub import ALLOWED_FILES

    found = {}
    for key, section in (("base", "base"), ("adapter", "sft")):
        name, revision = config[section]["name_or_path"], config[section].get("revision")
        try:
            found[key] = snapshot_download(name, revision=revision, allow_patterns=ALLOWED_FILES,
                                           local_files_only=True, cache_dir=cache_dir)
        except (LocalEntryNotFoundError, OSError, ValueError):
            return None
    if not any(Path(found["base"]).glob("*.safetensors")) or not any(Path(found["adapter"]).glob("*.safetensors")):
        return None
    return {**found, "weights": f"the real {config['base']['name_or_path']} and {config['sft']['name_or_path']} "
                                "from the hub cache"}


def build_full_standin(folder: Path, rows: list[dict], system_prompt: str, seed: int = 0) -> dict:
    """``folder/base`` (Qwen3-0.6B's config.json, random weights in bfloat16, the stand-in tokenizer, Qwen3-0.6B's
    generation_config.json) and ``folder/sft_adapter`` (the hub adapter's shape, dropout 0.05); returns their paths.
    Reused when already built."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from thai_grpo_tools.rehearsal import (QWEN3_0_6B_CONFIG, QWEN3_GENERATION_CONFIG, build_standin_adapter,
                                            standin_tokenizer)

    base, adapter = folder / "base", folder / "sft_adapter"
    if not (base / "config.json").is_file():
        tokenizer = standin_tokenizer([system_prompt] + [r["question"] for r in rows] + ["<think>คิด</think> 42"])
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(Qwen3Config(**{**QWEN3_0_6B_CONFIG, "torch_dtype": "float32"}))
        model.to(torch.bfloat16).save_pretrained(base, safe_serialization=True)
        (base / "config.json").write_text(json.dumps(QWEN3_0_6B_CONFIG, indent=2) + "\n", encoding="utf-8")
        (base / "generation_config.json").write_text(json.dumps(QWEN3_GENERATION_CONFIG, indent=2) + "\n",
                                                     encoding="utf-8")
        tokenizer.save_pretrained(base)
        del model
    if not (adapter / "adapter_config.json").is_file():
        build_standin_adapter(base, adapter)
    return {"base": str(base), "adapter": str(adapter),
            "weights": "random weights (the hub cache holds no real base and adapter): completions run to the budget"}


def answer_pairs(tokenizer, rows: list[dict], system_prompt: str, completion_tokens: int,
                 chat_template_kwargs: dict | None = None) -> list[dict]:
    """DPO's and the reward model's pairs for ``rows``, in ``preferences.build_pairs``' format: chosen the right number,
    rejected a wrong one, each after a think block filled so that the completion is ``completion_tokens`` tokens long
    (the budget the plan counts)."""
    from thai_grpo.data.prompts import build_prompt
    from thai_grpo.methods.preferences import prompt_token_ids, token_fields

    filler = tokenizer("คิดทีละขั้น " * completion_tokens, add_special_tokens=False)["input_ids"]

    def completion(number: int) -> str:
        tail = f"</think>\n{number}"
        room = completion_tokens - len(tokenizer("<think>" + tail, add_special_tokens=False)["input_ids"])
        return "<think>" + tokenizer.decode(filler[:max(room, 1)]) + tail

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    prompts = prompt_token_ids(tokenizer, [row["question"] for row in rows], system_prompt, chat_template_kwargs)
    pairs = []
    for row, prompt_ids in zip(rows, prompts):
        chosen, rejected = completion(row["answer"]), completion(row["answer"] + 1)
        pairs.append({"id": row["id"], "gold": row["answer"], "prompt": build_prompt(row["question"], system_prompt),
                      "chosen": [{"role": "assistant", "content": chosen}],
                      "rejected": [{"role": "assistant", "content": rejected}],
                      "chosen_reward": 1.5, "rejected_reward": 0.5,
                      # the token ids DPO trains on, stored as for the pipeline's sampled pairs
                      **token_fields({"prompt_ids": prompt_ids, "completion_budget": completion_tokens},
                                     {"token_ids": ids(chosen)}, {"token_ids": ids(rejected)})})
    return pairs


def measured_prompt_tokens(tokenizer, rows: list[dict], system_prompt: str, chat_template_kwargs: dict) -> int:
    """The longest prompt of ``rows`` in tokens, as the policy reads it (chat template, generation prompt)."""
    from thai_grpo.data.prompts import chat_prompt_texts

    texts = chat_prompt_texts(tokenizer, [r["question"] for r in rows], system_prompt, chat_template_kwargs)
    return max(len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in texts)


def update_record(result: dict) -> dict:
    """What a training stage's result says of its updates: its loss finite at every step, and the counts of updates
    the float16 loss scaler skipped, made from non-finite gradients and redone (``thai_grpo.methods.recorder``)."""
    from thai_grpo.methods.recorder import COUNTS

    losses = [step[key] for step in result.get("steps", []) for key in ("loss", "policy_loss") if key in step]
    return {"loss_finite": all(math.isfinite(value) for value in losses) if losses else None,
            **{key: result[key] for key in COUNTS if key in result}}


def device_precision(device: str, dtype: str) -> Precision:
    """The plan's precision for a rehearsal on ``device`` (``cpu``, or ``cuda`` with 16-bit frozen weights)."""
    return CPU if device == "cpu" else dataclasses.replace(T4, device=f"cuda ({dtype} weights and autocast)")


def plans(config: dict, precision: Precision, prompt: int, completions: int, card_gib: float = CARD_GIB) -> list[dict]:
    """The memory plan at exactly the rehearsal's sizes: Qwen3-0.6B's shape, the stand-in adapter's LoRA, prompts of
    ``prompt`` tokens, ``completions`` scored by the token log-probs stage, ``auto`` as a card of ``card_gib``."""
    from thai_grpo.jobs.memory_plan import Lora
    from thai_grpo_tools.stage_plans import QWEN3_0_6B
    from thai_grpo_tools.rehearsal import STANDIN_ADAPTER

    return stage_plans(config, QWEN3_0_6B, Lora.from_config(STANDIN_ADAPTER), precision=precision, prompt=prompt,
                       logprob_rows=min(32, completions), card_gib=card_gib)


def predicted_bytes(stage: str, stage_plan: list[dict]) -> int | None:
    """The plan's peak for a rehearsal stage: the largest of the plan stages it runs (None where none is planned)."""
    peaks = [plan["peak_bytes"] for plan in stage_plan if plan["stage"] in STAGES[stage]]
    return max(peaks) if peaks else None


def comparison(records: list[dict], stage_plan: list[dict]) -> list[dict]:
    """Per stage record (``stage``, ``peak_bytes``, ``seconds_per_step``): the prediction beside it and their ratio; a
    stage whose ``auto`` size, chosen by the job's own code, is not the plan's is an error."""
    rows = []
    for record in records:
        predicted = predicted_bytes(record["stage"], stage_plan)
        measured = record.get("peak_bytes")
        sized = record.get("sized") or {}
        chosen = {key: value for key, value in sized.items() if key != "planned"}
        if chosen and list(chosen.values()) != [sized["planned"]] and "error" not in record:  # auto, as the job sizes it
            record = {**record, "error": f"sized {chosen} where the plan sized {sized['planned']}"}
        rows.append({**record, "predicted_bytes": predicted,
                     "ratio": round(measured / predicted, 2) if predicted and measured else None})
    return rows


def table(rows: list[dict], memory: str) -> str:
    """A markdown table of ``comparison``: stage, predicted and measured GiB, measured / predicted, s/step; where the
    record has them (``update_record``), whether every loss was finite and the updates lost (skipped by the float16
    loss scaler / made from non-finite gradients)."""
    def gib(value):
        return "-" if value is None else f"{value / 2 ** 30:.2f}"

    def updates(row):
        if "optimizer_steps_skipped" not in row:
            return "-"
        finite = {True: "finite", False: "NOT FINITE", None: "-"}[row.get("loss_finite")]
        redone = f", {row['scaler_redos']} redone" if row.get("scaler_redos") else ""
        return f"{finite}; {row['optimizer_steps_skipped']} skipped, {row['nonfinite_grad_steps']} non-finite{redone}"

    counted = any("optimizer_steps_skipped" in row for row in rows)
    lines = [f"| stage | predicted GiB | measured GiB ({memory}) | measured / predicted | s/step | steps |"
             + (" loss; updates lost |" if counted else ""), "|---|---|---|---|---|---|" + ("---|" if counted else "")]
    for row in rows:
        seconds = row.get("seconds_per_step")
        lines.append(f"| {row['stage']} | {gib(row['predicted_bytes'])} | {gib(row.get('peak_bytes'))} | "
                     f"{'-' if row['ratio'] is None else row['ratio']} | "
                     f"{'-' if seconds is None else f'{seconds:.1f}'} | {row.get('steps', '-')} |"
                     + (f" {updates(row)} |" if counted else ""))
    return "\n".join(lines)
