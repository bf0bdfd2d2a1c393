"""Per-token log-probabilities of sampled completions under the trained policy and under its reference.

The raw material of the report's real k1-vs-k3 figure: for tokens x sampled from pi_theta, k1 = log pi_theta(x)
- log pi_ref(x) and k3 = (r - 1) - log r with r = pi_ref(x) / pi_theta(x) (see thai_grpo.kl). The reference
is the SFT adapter, the policy GRPO started from (the KL TRL optimises against, see thai_grpo.grpo).
"""

from __future__ import annotations

from pathlib import Path

from thai_grpo.data import build_prompt


def completion_logprobs(model, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
    """log p(completion token t | prompt, completion tokens < t) for every completion token."""
    import torch

    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
    targets = ids[0, 1:]
    per_token = logprobs.gather(1, targets[:, None])[:, 0]
    return per_token[len(prompt_ids) - 1:].tolist()


def policy_and_reference_logprobs(base_dir: str | Path, policy_adapter: str | Path, reference_adapter: str | Path,
                                  samples: list[dict], system_prompt: str, max_completions: int) -> dict:
    """Log-probs of the first ``max_completions`` sampled completions (in file order) under both adapters."""
    from peft import PeftModel

    from thai_grpo.models import load_base_model, load_tokenizer, require_model_dir

    tokenizer = load_tokenizer(base_dir)
    model = PeftModel.from_pretrained(load_base_model(base_dir), str(require_model_dir(policy_adapter, "adapter")),
                                      adapter_name="policy")
    model.load_adapter(str(require_model_dir(reference_adapter, "adapter")), adapter_name="reference")
    model.eval()
    pairs = [(record, completion) for record in samples for completion in record["completions"]][:max_completions]
    result = {"logp_policy": [], "logp_ref": [], "num_completions": len(pairs),
              "policy": str(policy_adapter), "reference": str(reference_adapter)}
    for record, completion in pairs:
        prompt = tokenizer.apply_chat_template(build_prompt(record["question"], system_prompt), tokenize=False,
                                               add_generation_prompt=True)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        completion_ids = tokenizer(completion["text"], add_special_tokens=False)["input_ids"]
        if not completion_ids:
            continue
        for adapter, key in (("policy", "logp_policy"), ("reference", "logp_ref")):
            model.set_adapter(adapter)
            result[key] += completion_logprobs(model, prompt_ids, completion_ids)
    return result
