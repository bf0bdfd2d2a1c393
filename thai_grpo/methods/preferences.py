"""Preference pairs for DPO and PPO's reward model from the SFT policy's samples on the training problems: a problem's
first correct completion (chosen) and first wrong one (rejected); one always or never solved gives no pair."""

from __future__ import annotations

from thai_grpo.core.rewards import CORRECT_REWARD
from thai_grpo.data.prompts import build_prompt, prompt_token_ids


def _is_correct(completion: dict) -> bool:
    return completion["correct"] >= CORRECT_REWARD


def pair_for_problem(completions: list[dict]) -> tuple[dict, dict] | None:
    """(first correct completion, first wrong completion), or None when the samples are all right or all wrong."""
    right = next((c for c in completions if _is_correct(c)), None)
    wrong = next((c for c in completions if not _is_correct(c)), None)
    return (right, wrong) if right is not None and wrong is not None else None


def build_pairs(records: list[dict], system_prompt: str) -> tuple[list[dict], dict]:
    """DPOTrainer's rows ``{prompt, chosen, rejected}`` (with id, gold, rewards, token ids) and the counts."""
    pairs = []
    for record in records:
        pair = pair_for_problem(record["completions"])
        if pair is None:
            continue
        chosen, rejected = pair
        pairs.append({"id": record["id"], "gold": record["gold"],
                      "prompt": build_prompt(record["question"], system_prompt),
                      "chosen": [{"role": "assistant", "content": chosen["text"]}],
                      "rejected": [{"role": "assistant", "content": rejected["text"]}],
                      "chosen_reward": chosen["total"], "rejected_reward": rejected["total"],
                      **token_fields(record, chosen, rejected)})
    samples = [c for r in records for c in r["completions"]]
    all_right = sum(bool(r["completions"]) and all(_is_correct(c) for c in r["completions"]) for r in records)
    stats = {"problems": len(records), "samples": len(samples),
             "samples_per_problem": len(records[0]["completions"]) if records else 0,
             "correct_samples": sum(_is_correct(c) for c in samples), "pairs": len(pairs),
             "all_right": all_right, "all_wrong": len(records) - len(pairs) - all_right,
             "generated_tokens": int(sum(c.get("num_tokens", 0) for c in samples))}
    return pairs, stats


def token_fields(record: dict, chosen: dict, rejected: dict) -> dict:
    """``{prompt_ids, chosen_ids, rejected_ids, completion_budget}`` of one pair; empty without token ids."""
    if "prompt_ids" not in record:
        return {}
    return {"prompt_ids": list(record["prompt_ids"]), "chosen_ids": list(chosen["token_ids"]),
            "rejected_ids": list(rejected["token_ids"]), "completion_budget": record["completion_budget"]}


def sample_training_problems(model, tokenizer, rows: list[dict], system_prompt: str, num_samples: int,
                             max_new_tokens: int, temperature: float, batch_size: int, seed: int,
                             chat_template_kwargs: dict | None = None, progress=None) -> list[dict]:
    """``num_samples`` graded completions per training problem, seeded from (seed, problem id, sample index)."""
    from thai_grpo.models.sampling import sampled_groups, score_completion

    groups = sampled_groups(model, tokenizer, rows, system_prompt, num_samples, max_new_tokens, temperature,
                            batch_size, seed, chat_template_kwargs, progress)
    prompts = prompt_token_ids(tokenizer, [r["question"] for r in rows], system_prompt, chat_template_kwargs)
    return [{"id": row["id"], "question": row["question"], "gold": row["answer"], "prompt_ids": prompt,
             "completion_budget": max_new_tokens, "completions": [score_completion(c, row["answer"]) for c in samples]}
            for row, prompt, samples in zip(rows, prompts, groups)]
