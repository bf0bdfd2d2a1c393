"""Shared prompts computed once (thai_grpo.models.cpu.shared_prefix): the same samples, log-probs and gradients as
running every row in full, on a tiny Qwen3 + LoRA with left-padded prompts of different lengths."""

from __future__ import annotations

import pytest
import torch

from thai_grpo.models.cpu.shared_prefix import (completion_logprobs_sharing_prompts, distinct_rows,
                                                generate_sharing_prompts)


def test_distinct_rows_numbers_prompts_by_first_appearance_and_maps_every_row():
    ids = torch.tensor([[5, 6], [1, 2], [5, 6], [1, 2], [9, 9], [5, 6]])
    mask = torch.ones_like(ids)
    mask[5, 0] = 0  # same ids, other mask: another prompt
    first, inverse = distinct_rows(ids, mask)
    assert first.tolist() == [0, 1, 4, 5]
    assert inverse.tolist() == [0, 1, 0, 1, 2, 3]
    brute = {}
    for row in range(len(ids)):  # the brute-force reading: a row's prompt is the first equal row
        key = (tuple(ids[row].tolist()), tuple(mask[row].tolist()))
        brute.setdefault(key, row)
        assert first[inverse[row]] == brute[key]


@pytest.fixture(scope="module")
def policy(tiny_model_dir, tiny_adapter_dir):
    from thai_grpo.models.loading import load_policy, load_tokenizer

    return load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True), load_tokenizer(tiny_model_dir)


def left_padded_prompts(tokenizer, questions):
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.models.sampling import encode_prompts

    return encode_prompts(tokenizer, questions, SYSTEM_PROMPT, {})


QUESTIONS = ["มีแอปเปิล 3 ผล ได้อีก 4 ผล มีกี่ผล", "2 บวก 2", "ร้านขายส้ม 12 ผล ขายไป 5 ผล เหลือกี่ผล แล้วซื้อเพิ่ม 7"]


@pytest.mark.parametrize("temperature", [None, 1.0])
def test_generate_sharing_prompts_gives_the_same_tokens_as_generate(policy, temperature):
    from thai_grpo.models.sampling import generation_config, stop_token_ids

    model, tokenizer = policy
    model.eval()
    encoded = left_padded_prompts(tokenizer, QUESTIONS)
    assert (encoded["attention_mask"] == 0).any()  # padding, whose positions must be numbered as generate does
    samples = 4 if temperature else 1  # greedy returns one sequence per prompt
    config = generation_config(tokenizer, stop_token_ids(model, tokenizer), samples, 12, temperature)
    outputs = []
    for sharing in (False, True):
        torch.manual_seed(3)
        with torch.no_grad():
            outputs.append(generate_sharing_prompts(model, encoded["input_ids"], encoded["attention_mask"], config)
                           if sharing else model.generate(**encoded, generation_config=config))
    assert torch.equal(outputs[0], outputs[1])


def grpo_batch(model, tokenizer, tmp_path, activation_checkpointing: bool):
    """(trainer, ids, mask, completion_mask): a GRPO trainer that shares prompts (``share_prompts``) over ``model``,
    and a batch of the QUESTIONS' prompts, 2 random completions of 7 tokens each, one of them stopped early."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from thai_grpo.models.cpu import share_prompts

    model.train()
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", per_device_train_batch_size=4,
                      num_generations=2, max_completion_length=8, beta=0.04, logging_steps=1,
                      activation_checkpointing=activation_checkpointing,  # on: TRL's own pass (its default)
                      bf16=False)  # as the pipeline runs on a CPU (float32)
    trainer = share_prompts(GRPOTrainer(
        model=model, reward_funcs=[lambda completions, **kw: [0.0] * len(completions)], args=args,
        processing_class=tokenizer, train_dataset=Dataset.from_list([{"prompt": q} for q in QUESTIONS])))
    prompts = left_padded_prompts(tokenizer, QUESTIONS)
    prompt_ids = prompts["input_ids"].repeat_interleave(2, 0)
    prompt_mask = prompts["attention_mask"].repeat_interleave(2, 0)
    torch.manual_seed(0)
    completion = torch.randint(3, len(tokenizer) - 2, (prompt_ids.size(0), 7))
    completion_mask = torch.ones_like(completion)
    completion_mask[1, 4:] = 0  # a completion that stopped early
    return trainer, torch.cat([prompt_ids, completion], 1), torch.cat([prompt_mask, completion_mask], 1), completion_mask


def logprob_pass(trainer, method, ids, mask, completion_mask):
    """(log-probs, entropies, LoRA gradients) of ``method`` (a ``_get_per_token_logps_and_entropies``) on the batch,
    the gradients those of the completions' summed log-probs."""
    lora = [p for p in trainer.model.parameters() if p.requires_grad]
    trainer.model.zero_grad()
    logps, entropies, _ = method(trainer.model, ids, mask, completion_mask.size(1), batch_size=4,
                                 compute_entropy=True)
    (logps * completion_mask).sum().backward()
    return logps.detach(), entropies.detach(), [p.grad.clone() for p in lora]


def trls_own(trainer):
    from trl import GRPOTrainer

    return lambda *args, **kwargs: GRPOTrainer._get_per_token_logps_and_entropies(trainer, *args, **kwargs)


def test_trainer_log_probs_and_gradients_match_trls_own_pass(policy, tmp_path):
    trainer, ids, mask, completion_mask = grpo_batch(*policy, tmp_path, activation_checkpointing=False)
    # the prompts do repeat, so the shared pass is the one compared (it returns None when none repeats)
    assert completion_logprobs_sharing_prompts(trainer.model, ids, mask, completion_mask.size(1), False,
                                               trainer.accelerator.autocast) is not None
    shared = logprob_pass(trainer, trainer._get_per_token_logps_and_entropies, ids, mask, completion_mask)
    full = logprob_pass(trainer, trls_own(trainer), ids, mask, completion_mask)
    torch.testing.assert_close(shared[0], full[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(shared[1], full[1], atol=1e-5, rtol=1e-5)
    assert any(g.abs().sum() > 0 for g in full[2])  # the comparison is of real gradients
    for ours, theirs in zip(shared[2], full[2]):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-4)


def test_prompts_are_shared_on_a_cpu_only():
    from thai_grpo.models.cpu import shares_prompts_on

    assert shares_prompts_on("cpu") and shares_prompts_on(torch.device("cpu"))
    assert not shares_prompts_on(torch.device("cuda", 0)) and not shares_prompts_on("cuda")
    assert not shares_prompts_on("cpu", use_vllm=True)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_off_a_cpu_a_training_step_is_trls_own(tiny_model_dir, tiny_adapter_dir, tmp_path, monkeypatch, device):
    """On a GPU (here: the trainer told its device is one) no pass of a step is replaced: ``model.generate`` is the
    model's own and the log-probabilities come from TRL's method; on a CPU both shared passes run."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    import thai_grpo.models.cpu as cpu
    import thai_grpo.models.cpu.shared_prefix as shared
    from thai_grpo.models.loading import load_policy, load_tokenizer

    calls = {"generate": 0, "logprobs": 0, "trl_logprobs": 0}

    def counted(key, function):
        def call(*args, **kwargs):
            calls[key] += 1
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(shared, "generate_sharing_prompts", counted("generate", shared.generate_sharing_prompts))
    monkeypatch.setattr(shared, "completion_logprobs_sharing_prompts",
                        counted("logprobs", shared.completion_logprobs_sharing_prompts))
    monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies",
                        counted("trl_logprobs", GRPOTrainer._get_per_token_logps_and_entropies))
    on_this_device = cpu.shares_prompts_on
    monkeypatch.setattr(cpu, "shares_prompts_on", lambda _device, use_vllm=False: on_this_device(device, use_vllm))
    model, tokenizer = load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True), load_tokenizer(tiny_model_dir)
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", per_device_train_batch_size=4,
                      num_generations=2, max_completion_length=6, beta=0.04, max_steps=1, save_strategy="no",
                      activation_checkpointing=False, bf16=False, disable_tqdm=True)
    trainer = cpu.share_prompts(GRPOTrainer(
        model=model, reward_funcs=[lambda completions, **kw: [float(len(c)) for c in completions]], args=args,
        processing_class=tokenizer, train_dataset=Dataset.from_list([{"prompt": q} for q in QUESTIONS[:2]])))
    trainer.train()
    assert "generate" not in vars(model)  # the instance's generate was restored (or never replaced)
    if device == "cpu":
        assert calls["generate"] >= 1 and calls["logprobs"] >= 1
    else:
        assert calls == {"generate": 0, "logprobs": 0, "trl_logprobs": calls["trl_logprobs"]}
        assert calls["trl_logprobs"] >= 2  # the reference pass and the policy's, TRL's own


def test_trls_pass_on_a_cpu_scores_only_the_completion_positions_with_the_same_numbers(tiny_model_dir, tiny_adapter_dir,
                                                                                        tmp_path, monkeypatch):
    """With activation checkpointing (the real config), a step's log-probability passes are TRL's own; on a CPU they
    send only the labelled positions through the LM head's vocabulary tiles, as on a GPU, and every completion
    position gets the log-prob, entropy and gradient that TRL's pass over every position gives."""
    import trl.trainer.utils as trl_utils

    from thai_grpo.models.loading import load_policy, load_tokenizer

    model = load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True)  # its own: the module's policy has a ref
    trainer, ids, mask, completion_mask = grpo_batch(model, load_tokenizer(tiny_model_dir), tmp_path,
                                                     activation_checkpointing=True)
    rows = []
    kernel = trl_utils._ChunkedLogProbFunction

    class Counted:
        @staticmethod
        def apply(hidden, *rest):
            rows.append(hidden.size(0))
            return kernel.apply(hidden, *rest)

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", Counted)
    ours = logprob_pass(trainer, trainer._get_per_token_logps_and_entropies, ids, mask, completion_mask)
    assert rows == [int(completion_mask[:4].sum()), int(completion_mask[4:].sum())]  # labelled positions only
    rows.clear()
    full = logprob_pass(trainer, trls_own(trainer), ids, mask, completion_mask)
    assert rows == [4 * (ids.size(1) - 1), 2 * (ids.size(1) - 1)]  # TRL's own on a CPU: every position of each chunk
    assert trl_utils._use_triton(torch.device("cpu")) is False  # the switch is back as TRL left it
    labelled = completion_mask.bool()
    torch.testing.assert_close(ours[0][labelled], full[0][labelled], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(ours[1][labelled], full[1][labelled], atol=1e-6, rtol=1e-6)
    assert torch.all(ours[0][~labelled] == 0) and torch.all(full[0][~labelled] == 0)
    assert any(g.abs().sum() > 0 for g in full[2])
    for mine, theirs in zip(ours[2], full[2]):
        torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=1e-5)
