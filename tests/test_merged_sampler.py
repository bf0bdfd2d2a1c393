"""Rollouts from a merged copy of the LoRA policy (thai_grpo.models.cpu.merged_sampler): the same function as the
PeftModel, kept up to date as the adapter trains, used only where it is exact."""

from __future__ import annotations

import pytest
import torch

from thai_grpo.models.cpu.merged_sampler import MergedCopy, can_merge_copy


@pytest.fixture
def policy(tiny_model_dir, tiny_adapter_dir):
    from thai_grpo.models.loading import load_policy

    model = load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True)
    with torch.no_grad():  # a trained adapter: the fresh one's B = 0 would make every copy look right
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.3)
    return model


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_the_copy_is_the_policys_function_and_follows_its_updates(policy):
    ids = torch.randint(3, 400, (3, 17), generator=torch.Generator().manual_seed(0))
    copy = MergedCopy(policy)
    torch.testing.assert_close(logits(copy.model, ids), logits(policy, ids), atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # an optimizer step on the adapter
        for name, parameter in policy.named_parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    assert (logits(copy.model, ids) - logits(policy, ids)).abs().max() > 1e-3  # stale until refreshed
    copy.refresh()
    torch.testing.assert_close(logits(copy.model, ids), logits(policy, ids), atol=1e-5, rtol=1e-5)
    base = policy.get_base_model()
    frozen = {n: p.clone() for n, p in base.named_parameters() if "base_layer" in n}
    copy.refresh()
    assert all(torch.equal(p, frozen[n]) for n, p in base.named_parameters() if "base_layer" in n)  # untouched


def test_greedy_rollouts_are_the_policys(policy, tiny_model_dir):
    from thai_grpo.models.loading import load_tokenizer
    from thai_grpo.models.sampling import encode_prompts, generation_config, stop_token_ids
    from thai_grpo.data.prompts import SYSTEM_PROMPT

    tokenizer = load_tokenizer(tiny_model_dir)
    encoded = encode_prompts(tokenizer, ["2 บวก 2", "มีส้ม 5 ผล กินไป 2 ผล"], SYSTEM_PROMPT, {})
    config = generation_config(tokenizer, stop_token_ids(policy, tokenizer), 1, 10, None)
    with torch.no_grad():
        ours = MergedCopy(policy).model.generate(**encoded, generation_config=config)
        theirs = policy.generate(**encoded, generation_config=config)
    assert torch.equal(ours, theirs)


def test_only_where_exact(policy, tiny_model_dir):
    from peft import LoraConfig, get_peft_model

    from thai_grpo.models.loading import load_base_model

    assert can_merge_copy(policy)
    with_dropout = get_peft_model(load_base_model(tiny_model_dir),
                                  LoraConfig(r=2, lora_alpha=4, lora_dropout=0.1, target_modules=["q_proj"]))
    assert not can_merge_copy(with_dropout.train())  # a merged copy would sample without the dropout
    assert can_merge_copy(with_dropout.eval())
    assert not can_merge_copy(load_base_model(tiny_model_dir))  # no adapter: nothing to merge
