"""Per-token log-probabilities of sampled completions under the trained policy and under its reference.

The raw material of the report's real k1-vs-k3 figure: for tokens x sampled from pi_theta, k1 = log pi_theta(x)
- log pi_ref(x) and k3 = (r - 1) - log r with r = pi_ref(x) / pi_theta(x) (see thai_grpo.kl). The reference
is the SFT adapter, the policy GRPO started from (the KL TRL optimises against, see thai_grpo.methods.grpo).
"""

from __future__ import annotations

from pathlib import Path

from thai_grpo.data import chat_prompt_texts


def completion_logprobs(model, pairs: list[tuple[list[int], list[int]]], pad_id: int) -> list[list[float]]:
    """For each (prompt ids, completion ids): log p(completion token t | prompt, completion tokens < t).

    One right-padded forward pass for the whole list (padding sits after every real token, so causal
    attention never lets a real token see it).
    """
    import torch

    sequences = [prompt + completion for prompt, completion in pairs]
    width = max(map(len, sequences))
    ids = torch.full((len(sequences), width), pad_id)
    mask = torch.zeros_like(ids)
    for row, sequence in enumerate(sequences):
        ids[row, :len(sequence)] = torch.tensor(sequence)
        mask[row, :len(sequence)] = 1
    with torch.no_grad():
        logprobs = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits[:, :-1].float(), dim=-1)
    per_token = logprobs.gather(2, ids[:, 1:, None])[..., 0]
    return [per_token[row, len(prompt) - 1:len(prompt) - 1 + len(completion)].tolist()
            for row, (prompt, completion) in enumerate(pairs)]


def policy_and_reference_logprobs(base_dir: str | Path, policy_adapter: str | Path, reference_adapter: str | Path,
                                  samples: list[dict], system_prompt: str, max_completions: int,
                                  batch_size: int = 32, chat_template_kwargs: dict | None = None) -> dict:
    """Log-probs of the first ``max_completions`` sampled completions (in file order) under both adapters."""
    from peft import PeftModel

    from thai_grpo.models import load_base_model, load_tokenizer, require_model_dir

    tokenizer = load_tokenizer(base_dir)
    model = PeftModel.from_pretrained(load_base_model(base_dir), str(require_model_dir(policy_adapter, "adapter")),
                                      adapter_name="policy")
    model.load_adapter(str(require_model_dir(reference_adapter, "adapter")), adapter_name="reference")
    model.eval()
    pairs = []
    for record in samples:
        (prompt,) = chat_prompt_texts(tokenizer, [record["question"]], system_prompt, chat_template_kwargs)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        for completion in record["completions"]:
            completion_ids = tokenizer(completion["text"], add_special_tokens=False)["input_ids"]
            if completion_ids and len(pairs) < max_completions:
                pairs.append((prompt_ids, completion_ids))
    result = {"logp_policy": [], "logp_ref": [], "num_completions": len(pairs),
              "policy": str(policy_adapter), "reference": str(reference_adapter)}
    for adapter, key in (("policy", "logp_policy"), ("reference", "logp_ref")):
        model.set_adapter(adapter)
        for start in range(0, len(pairs), batch_size):
            for values in completion_logprobs(model, pairs[start:start + batch_size], tokenizer.pad_token_id):
                result[key] += values
    return result
