import math

import pytest

from thai_grpo.token_logprobs import completion_logprobs, policy_and_reference_logprobs


def test_completion_logprobs_match_a_direct_softmax(tiny_model_dir):
    import torch

    from thai_grpo.models import load_base_model

    model = load_base_model(tiny_model_dir).eval()
    prompt, completion = [5, 6, 7], [8, 9]
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0]
    expected = [torch.log_softmax(logits[2], -1)[8].item(), torch.log_softmax(logits[3], -1)[9].item()]
    alone = completion_logprobs(model, [(prompt, completion)], pad_id=0)[0]
    batched = completion_logprobs(model, [([5, 6, 7, 10, 11, 12], [13]), (prompt, completion)], pad_id=0)[1]
    assert alone == pytest.approx(expected, abs=1e-5)
    assert batched == pytest.approx(expected, abs=1e-4)  # right padding does not change a shorter row
    assert all(lp <= 0 for lp in alone)


def test_same_adapter_as_policy_and_reference_gives_zero_kl(tiny_model_dir, tiny_adapter_dir):
    samples = [{"question": "สมชายมีส้ม 3 ผล", "completions": [{"text": "<think>3</think> 3"}, {"text": "4"}]}]
    result = policy_and_reference_logprobs(tiny_model_dir, tiny_adapter_dir, tiny_adapter_dir, samples, "ระบบ", 10)
    assert result["num_completions"] == 2 and len(result["logp_policy"]) == len(result["logp_ref"]) > 2
    assert all(math.isclose(p, r, abs_tol=1e-6) for p, r in zip(result["logp_policy"], result["logp_ref"]))
