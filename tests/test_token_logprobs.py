import math

import numpy as np
import pytest

from thai_grpo.evaluation.token_logprobs import (completion_log_softmax, policy_and_reference_logprobs, position_kl,
                                                 sampled_token_pairs)


def completion_logprobs(model, pairs: list[tuple[list[int], list[int]]], pad_id: int,
                        temperature: float = 1.0) -> list[list[float]]:
    """For each (prompt ids, completion ids): log p(completion token t | prompt, completion tokens < t) at
    ``temperature``."""
    import torch

    return [rows.gather(1, torch.tensor(completion, device=rows.device)[:, None])[:, 0].tolist()
            for rows, (_, completion) in zip(completion_log_softmax(model, pairs, pad_id, temperature), pairs)]


SYSTEM = "ระบบ"


def test_completion_logprobs_match_a_direct_softmax(tiny_model_dir):
    import torch

    from thai_grpo.models.loading import load_base_model

    model = load_base_model(tiny_model_dir).eval()
    prompt, completion = [5, 6, 7], [8, 9]
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0]
    expected = [torch.log_softmax(logits[2], -1)[8].item(), torch.log_softmax(logits[3], -1)[9].item()]
    alone = completion_logprobs(model, [(prompt, completion)], pad_id=0)[0]
    longer = ([5, 6, 7, 10, 11, 12], [13])  # its completion starts 3 positions later than the shorter row's
    with torch.no_grad():
        longer_logits = model(torch.tensor([longer[0] + longer[1]])).logits[0]
    batched = completion_logprobs(model, [longer, (prompt, completion)], pad_id=0)
    assert alone == pytest.approx(expected, abs=1e-5)
    assert batched[1] == pytest.approx(expected, abs=1e-4)  # right padding does not change a shorter row
    assert batched[0] == pytest.approx([torch.log_softmax(longer_logits[5], -1)[13].item()], abs=1e-4)
    assert all(lp <= 0 for lp in alone)


def test_completion_logprobs_are_taken_at_the_sampling_temperature(tiny_model_dir):
    import torch

    from thai_grpo.models.loading import load_base_model

    model = load_base_model(tiny_model_dir).eval()
    prompt, completion = [5, 6, 7], [8, 9]
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0] / 0.5
    expected = [torch.log_softmax(logits[2], -1)[8].item(), torch.log_softmax(logits[3], -1)[9].item()]
    assert completion_logprobs(model, [(prompt, completion)], pad_id=0, temperature=0.5)[0] == \
        pytest.approx(expected, abs=1e-5)
    assert completion_logprobs(model, [(prompt, completion)], pad_id=0)[0] != pytest.approx(expected, abs=1e-3)


def test_position_kl_matches_a_sum_over_the_vocabulary():
    import torch

    rng = np.random.default_rng(0)
    logits_p, logits_q = rng.normal(0, 2, (3, 50)), rng.normal(0, 2, (3, 50))
    result = position_kl(torch.log_softmax(torch.tensor(logits_p), -1), torch.log_softmax(torch.tensor(logits_q), -1))
    for row in range(3):
        p = np.exp(logits_p[row]) / np.exp(logits_p[row]).sum()
        q = np.exp(logits_q[row]) / np.exp(logits_q[row]).sum()
        kl = sum(p[y] * math.log(p[y] / q[y]) for y in range(50))
        k1 = [math.log(p[y] / q[y]) for y in range(50)]
        k3 = [q[y] / p[y] - 1 - math.log(q[y] / p[y]) for y in range(50)]
        assert sum(p[y] * k3[y] for y in range(50)) == pytest.approx(kl)  # k3 is unbiased too
        assert result["kl"][row].item() == pytest.approx(kl, rel=1e-9)
        assert result["var_k1"][row].item() == pytest.approx(sum(p[y] * (k1[y] - kl) ** 2 for y in range(50)), rel=1e-9)
        assert result["var_k3"][row].item() == pytest.approx(sum(p[y] * (k3[y] - kl) ** 2 for y in range(50)), rel=1e-9)


def test_the_sampled_ids_are_scored_not_a_retokenization(tiny_model_dir):
    from thai_grpo.models.loading import load_tokenizer

    tokenizer = load_tokenizer(tiny_model_dir)
    samples = [{"question": "สมชายมีส้ม 3 ผล", "completions": [{"text": "ignored", "token_ids": [9, 8, 7]},
                                                              {"text": "", "token_ids": []}]}]
    (pair,) = sampled_token_pairs(tokenizer, samples, SYSTEM, 10)
    assert pair[1] == [9, 8, 7] and pair[0][-1] != 9


def test_same_adapter_as_policy_and_reference_gives_zero_kl(tiny_model_dir, tiny_adapter_dir):
    samples = [{"id": "p1", "question": "สมชายมีส้ม 3 ผล", "completions": [{"token_ids": [5, 6, 7]}, {"token_ids": []},
                                                                        {"token_ids": [8]}]},
               {"id": "p2", "question": "แม่ซื้อไข่ 4 ฟอง", "completions": [{"token_ids": [9, 5]}, {"token_ids": [6]}]}]
    result = policy_and_reference_logprobs(tiny_model_dir, tiny_adapter_dir, tiny_adapter_dir, samples, SYSTEM, 3)
    assert result["num_completions"] == 3 and result["completion_lengths"] == [3, 1, 2]
    assert result["completion_problems"] == ["p1", "p1", "p2"]  # each completion's problem: the bootstrap's clusters
    assert len(result["logp_policy"]) == len(result["logp_ref"]) == len(result["kl_exact"]) == 6
    assert all(math.isclose(p, r, abs_tol=1e-6) for p, r in zip(result["logp_policy"], result["logp_ref"]))
    assert all(abs(value) < 1e-9 for key in ("kl_exact", "var_k1", "var_k3") for value in result[key])


@pytest.fixture(scope="module")
def moved_adapter_dir(tmp_path_factory, tiny_model_dir):
    """A LoRA adapter with random (non-zero) B: a policy that differs from the tiny base + zero adapter."""
    import torch
    from peft import LoraConfig, get_peft_model

    from thai_grpo.models.loading import load_base_model

    torch.manual_seed(1)
    model = get_peft_model(load_base_model(tiny_model_dir),
                           LoraConfig(task_type="CAUSAL_LM", r=2, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                      init_lora_weights=False))
    path = tmp_path_factory.mktemp("moved-adapter")
    model.save_pretrained(path, safe_serialization=True)
    return path


@pytest.mark.slow
def test_k1_and_k3_of_tokens_sampled_from_the_policy_agree_with_the_exact_kl(tiny_model_dir, tiny_adapter_dir,
                                                                            moved_adapter_dir):
    """Many tokens sampled from pi itself (the held-out sampler at temperature 1, no truncation), scored as the
    token_logprobs stage scores them: k1's and k3's means agree with the mean exact KL of the same positions
    within 4 of their exact standard errors, and the bootstrap over problems sees those standard errors."""
    import torch

    from thai_grpo.analyses.kl import real_kl_summary
    from thai_grpo.models.loading import load_policy, load_tokenizer
    from thai_grpo.models.sampling import generate

    tokenizer = load_tokenizer(tiny_model_dir)
    policy = load_policy(tiny_model_dir, moved_adapter_dir, merged=True).eval()
    questions = [f"สมชายมีส้ม {n} ผล" for n in range(3, 13)] + [f"แม่ซื้อไข่ {n} ฟอง" for n in range(3, 13)]
    completions = generate(policy, tokenizer, questions, SYSTEM, num_samples=20, max_new_tokens=6,
                           temperature=1.0, seed=0)
    samples = [{"id": str(i), "question": q, "completions": c} for i, (q, c) in enumerate(zip(questions, completions))]
    result = policy_and_reference_logprobs(tiny_model_dir, moved_adapter_dir, tiny_adapter_dir, samples, SYSTEM, 400)
    summary = real_kl_summary(result, n_boot=500, seed=0)
    assert summary["tokens"] > 1500 and summary["means"]["exact"]["mean"] > 0.005
    for name in ("k1", "k3"):
        gap = summary["means"][f"{name}_minus_exact"]
        assert abs(gap["mean"]) < 4 * summary["exact_se"][name], (name, gap, summary["exact_se"][name])
        assert 0.5 < gap["se"] / summary["exact_se"][name] < 2  # no heavy tail here: the bootstrap sees the variance

    # the exact KL at the first completion's positions, summed over the vocabulary by hand
    reference = load_policy(tiny_model_dir, tiny_adapter_dir).eval()
    prompt, ids = sampled_token_pairs(tokenizer, samples, SYSTEM, 1)[0]
    with torch.no_grad():
        sequence = torch.tensor([prompt + ids])
        lp = torch.log_softmax(policy(sequence).logits[0].double(), -1)
        lq = torch.log_softmax(reference(sequence).logits[0].double(), -1)
    for t in range(len(ids)):
        row = len(prompt) - 1 + t
        brute = sum(math.exp(lp[row, y]) * (lp[row, y] - lq[row, y]).item() for y in range(lp.shape[1]))
        assert result["kl_exact"][t] == pytest.approx(brute, rel=1e-3, abs=1e-6)
        assert result["logp_policy"][t] == pytest.approx(lp[row, ids[t]].item(), abs=1e-4)
