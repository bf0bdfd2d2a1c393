"""Held-out sampling: n completions per problem at the training temperature, plus one greedy answer.

Sampling parameters mirror GRPO's rollouts (temperature, no top-k/top-p truncation), so pass@1 measures
the policy that was optimised. Every batch is seeded from (seed, batch index): same config, same samples.
"""

from __future__ import annotations

from thai_grpo.data import build_prompt
from thai_grpo.rewards import reward_breakdown


def _encode_prompts(tokenizer, questions: list[str], system_prompt: str, chat_template_kwargs: dict):
    texts = [tokenizer.apply_chat_template(build_prompt(q, system_prompt), tokenize=False,
                                           add_generation_prompt=True, **chat_template_kwargs) for q in questions]
    tokenizer.padding_side = "left"
    return tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)


def generate(model, tokenizer, questions: list[str], system_prompt: str, num_samples: int, max_new_tokens: int,
             temperature: float | None, seed: int, chat_template_kwargs: dict | None = None) -> list[list[dict]]:
    """Per question, ``num_samples`` completions ``{text, num_tokens, truncated}``; greedy when temperature is None."""
    import torch
    from transformers import GenerationConfig

    encoded = _encode_prompts(tokenizer, questions, system_prompt, chat_template_kwargs or {})
    sampling = temperature is not None
    config = GenerationConfig(
        do_sample=sampling, temperature=temperature if sampling else None, top_k=0 if sampling else None,
        top_p=1.0 if sampling else None, max_new_tokens=max_new_tokens, num_return_sequences=num_samples,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    with torch.no_grad():
        output = model.generate(**encoded.to(model.device), generation_config=config)
    new_tokens = output[:, encoded["input_ids"].shape[1]:]
    completions = []
    for row in new_tokens:
        ids = row.tolist()
        finished = tokenizer.eos_token_id in ids
        length = ids.index(tokenizer.eos_token_id) + 1 if finished else len(ids)
        completions.append({"text": tokenizer.decode(ids[:length], skip_special_tokens=True),
                            "num_tokens": length, "truncated": not finished})
    return [completions[i * num_samples:(i + 1) * num_samples] for i in range(len(questions))]


def score_completion(completion: dict, gold: int) -> dict:
    return {**completion, **reward_breakdown(completion["text"], gold)}


def sample_heldout(model, tokenizer, rows: list[dict], system_prompt: str, num_samples: int, max_new_tokens: int,
                   temperature: float, batch_size: int, seed: int, chat_template_kwargs: dict | None = None,
                   progress=None) -> list[dict]:
    """One record per held-out problem: its sampled completions and greedy answer, each with rewards."""
    records = []
    for batch_index, start in enumerate(range(0, len(rows), batch_size)):
        batch = rows[start:start + batch_size]
        questions = [r["question"] for r in batch]
        sampled = generate(model, tokenizer, questions, system_prompt, num_samples, max_new_tokens, temperature,
                           seed=seed + batch_index, chat_template_kwargs=chat_template_kwargs)
        greedy = generate(model, tokenizer, questions, system_prompt, 1, max_new_tokens, None,
                          seed=seed + batch_index, chat_template_kwargs=chat_template_kwargs)
        for row, samples, best in zip(batch, sampled, greedy):
            records.append({"id": row["id"], "question": row["question"], "gold": row["answer"],
                            "completions": [score_completion(c, row["answer"]) for c in samples],
                            "greedy": score_completion(best[0], row["answer"])})
        if progress:
            progress(f"sampled {len(records)}/{len(rows)} problems")
    return records
