"""Per-token log-probabilities of GRPO's sampled completions under the GRPO policy and the SFT adapter, with the
exact KL(GRPO || SFT) at each position: the raw material of the report's real k1-vs-k3 figure."""

from __future__ import annotations

from pathlib import Path

from thai_grpo.data.prompts import prompt_token_ids
from thai_grpo.jobs.memory_plan import logprob_pass_floats, rows_per_chunk, Shape


def completion_log_softmax(model, pairs: list[tuple[list[int], list[int]]], pad_id: int,
                           temperature: float = 1.0) -> list:
    """Per (prompt ids, completion ids): the log-softmax of logits / ``temperature`` at the completion's positions,
    from one right-padded pass; the LM head skips the prompt, which over a 152k vocabulary would dominate the time."""
    import torch

    from thai_grpo.models.sampling import right_padded

    ids, mask = right_padded([prompt + completion for prompt, completion in pairs], pad_id)
    width, device = ids.shape[1], next(model.parameters()).device
    ids, mask = ids.to(device), mask.to(device)
    first = min(len(prompt) for prompt, _ in pairs) - 1  # the first position whose output predicts a completion token
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=width - first).logits[:, :-1].float()
        logprobs = torch.log_softmax(logits if temperature == 1.0 else logits / temperature, dim=-1)
    return [logprobs[row, len(prompt) - 1 - first:len(prompt) - 1 - first + len(completion)]
            for row, (prompt, completion) in enumerate(pairs)]


def position_kl(logp_policy, logp_ref) -> dict:
    """Per position of two log-distributions, in float64: KL(pi || pi_ref), and Var = E[k^2] - KL^2 under y ~ pi of
    k1 = log pi(y) - log pi_ref(y) and of k3 = (r - 1) - log r, r = pi_ref(y) / pi(y) (both have mean KL)."""
    import torch

    lp, lq = logp_policy.double(), logp_ref.double()
    p = lp.exp()
    d = lq - lp
    k1, k3 = -d, torch.expm1(d) - d
    k1, k3 = torch.where(p > 0, k1, torch.zeros_like(k1)), torch.where(p > 0, k3, torch.zeros_like(k3))
    kl = (p * k1).sum(-1)
    return {"kl": kl, "var_k1": ((p * k1 ** 2).sum(-1) - kl ** 2).clamp(min=0),
            "var_k3": ((p * k3 ** 2).sum(-1) - kl ** 2).clamp(min=0)}


def chosen_completions(samples: list[dict], max_completions: int) -> list[tuple[dict, dict]]:
    """(problem record, completion) of the first ``max_completions`` non-empty completions in file order."""
    chosen = []
    for record in samples:
        for completion in record["completions"]:
            if len(chosen) >= max_completions:
                return chosen
            if completion["token_ids"]:
                chosen.append((record, completion))
    return chosen


def sampled_token_pairs(tokenizer, samples: list[dict], system_prompt: str, max_completions: int,
                        chat_template_kwargs: dict | None = None) -> list[tuple[list[int], list[int]]]:
    """(prompt ids as the sampler encodes them, sampled ``token_ids``) of ``chosen_completions``."""
    chosen = chosen_completions(samples, max_completions)
    if not chosen:  # a tokenizer refuses an empty batch
        return []
    prompts = prompt_token_ids(tokenizer, [record["question"] for record, _ in chosen], system_prompt,
                               chat_template_kwargs)
    return [(prompt, list(completion["token_ids"])) for prompt, (_, completion) in zip(prompts, chosen)]


def policy_and_reference_logprobs(base_dir: str | Path, policy_adapter: str | Path, reference_adapter: str | Path,
                                  samples: list[dict], system_prompt: str, max_completions: int,
                                  batch_size: int = 32, chat_template_kwargs: dict | None = None,
                                  temperature: float = 1.0, dtype: str = "float32") -> dict:
    """Per sampled token of ``chosen_completions``, flattened: its log-prob under both adapters and ``position_kl``'s
    values; per completion its length and problem id. ``dtype`` is float32 by default: the adapters move a token's
    log-probability by ~1e-3, below a 16-bit pass's rounding of the logits."""
    import torch
    from peft import PeftModel

    from thai_grpo.core.io import require_model_dir
    from thai_grpo.jobs.devices import job_device
    from thai_grpo.models.loading import load_base_model, load_tokenizer, weights_dtype
    from thai_grpo.models.sampling import evaluation_precision

    tokenizer = load_tokenizer(base_dir)
    model = PeftModel.from_pretrained(load_base_model(base_dir, dtype),  # eval.dtype, float32 by default: see above
                                      str(require_model_dir(policy_adapter, "adapter")), adapter_name="policy")
    model.load_adapter(str(require_model_dir(reference_adapter, "adapter")), adapter_name="reference")
    model.to(job_device()).eval()
    precision = evaluation_precision(weights_dtype(model), model.device)
    pairs = sampled_token_pairs(tokenizer, samples, system_prompt, max_completions, chat_template_kwargs)
    longest = max((len(prompt) + len(completion) for prompt, completion in pairs), default=1)
    shape = Shape.from_config(model.config)  # Qwen3's 152k vocabulary: ~4 rows per batch of 450 tokens
    batch_size = rows_per_chunk(logprob_pass_floats(shape, longest), batch_size)  # 1 GiB of float32 logits, two held
    keys = ("logp_policy", "logp_ref", "kl_exact", "var_k1", "var_k3")
    result = {key: [] for key in keys}
    for start in range(0, len(pairs), batch_size):
        batch = pairs[start:start + batch_size]
        model.set_adapter("policy")
        policy = completion_log_softmax(model, batch, tokenizer.pad_token_id, temperature)
        model.set_adapter("reference")
        reference = completion_log_softmax(model, batch, tokenizer.pad_token_id, temperature)
        for lp, lq, (_, completion) in zip(policy, reference, batch):
            index = torch.tensor(completion, device=lp.device)[:, None]
            exact = position_kl(lp, lq)
            for key, values in zip(keys, (lp.gather(1, index)[:, 0], lq.gather(1, index)[:, 0], exact["kl"],
                                          exact["var_k1"], exact["var_k3"])):
                result[key] += values.tolist()
    problems = [record["id"] for record, _ in chosen_completions(samples, max_completions)]
    return {**result, "completion_lengths": [len(completion) for _, completion in pairs],
            "completion_problems": problems, "num_completions": len(pairs),
            "tokens": "sampled token ids, stop token included",
            "temperature": temperature, "dtype": weights_dtype(model), **precision,
            "policy": str(policy_adapter), "reference": str(reference_adapter)}
