"""The prompts a policy reads: the chapter's conversational prompt (a Thai system message, the question as the user
turn), the text a chat template makes of it, and GRPOTrainer's dataset of them."""

from __future__ import annotations

# The offline models' system prompt: "think in <think>...</think>, then answer with a number". Short on purpose: it is
# in every SFT, GRPO and sampling sequence.
SYSTEM_PROMPT = "คิดใน <think>...</think> แล้วตอบเป็นตัวเลข"


def build_prompt(question: str, system_prompt: str = SYSTEM_PROMPT) -> list[dict]:
    """The conversational prompt: a Thai system message, then the question as the user turn."""
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": question}]


def chat_prompt_texts(tokenizer, questions: list[str], system_prompt: str,
                      chat_template_kwargs: dict | None = None) -> list[str]:
    """The prompts as the policy reads them, through the tokenizer's chat template as TRL does. Encode them with
    ``add_special_tokens=False``: the template already holds every special token."""
    return [tokenizer.apply_chat_template(build_prompt(q, system_prompt), tokenize=False, add_generation_prompt=True,
                                          **(chat_template_kwargs or {})) for q in questions]


def prompt_token_ids(tokenizer, questions: list[str], system_prompt: str,
                     chat_template_kwargs: dict | None = None) -> list[list[int]]:
    """Each prompt's ids as the policy reads them (``chat_prompt_texts``), without a batch's padding."""
    texts = chat_prompt_texts(tokenizer, questions, system_prompt, chat_template_kwargs)
    return [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def grpo_records(rows: list[dict], system_prompt: str) -> list[dict]:
    """GRPOTrainer's dataset: a conversational ``prompt``, plus ``answer`` and ``id``, which TRL hands to rewards."""
    return [{"prompt": build_prompt(r["question"], system_prompt), "answer": r["answer"], "id": r.get("id")}
            for r in rows]
