"""Held-out sampling stops where GRPO's rollouts stop, and a merged adapter is the same policy."""

from types import SimpleNamespace

import pytest

from thai_grpo.models.sampling import completion_record, stop_token_ids


def test_stop_tokens_follow_trl_tokenizer_eos_first_then_generation_config(tiny_tokenizer):
    eos = tiny_tokenizer.eos_token_id
    as_list = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=[7, 9]))
    assert stop_token_ids(as_list, tiny_tokenizer) == [eos, 7, 9]
    already = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=[9, eos]))
    assert stop_token_ids(already, tiny_tokenizer) == [9, eos]
    single = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=eos))
    assert stop_token_ids(single, tiny_tokenizer) == [eos]
    assert stop_token_ids(SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=None)),
                          tiny_tokenizer) == [eos]


def test_a_completion_ends_at_the_first_of_any_stop_token(tiny_tokenizer):
    text_ids = tiny_tokenizer("<think>คิด</think>\n12", add_special_tokens=False)["input_ids"]
    endoftext = tiny_tokenizer.pad_token_id  # <|endoftext|>: Qwen3's second EOS, a special token
    record = completion_record(tiny_tokenizer, text_ids + [endoftext, 5, 6], [tiny_tokenizer.eos_token_id, endoftext])
    assert record == {"text": tiny_tokenizer.decode(text_ids), "num_tokens": len(text_ids) + 1, "truncated": False,
                      "token_ids": text_ids + [endoftext]}  # the sampled ids themselves, the stop token included
    cut = completion_record(tiny_tokenizer, text_ids, [tiny_tokenizer.eos_token_id])
    assert cut["truncated"] and cut["num_tokens"] == len(text_ids) and cut["token_ids"] == text_ids


def test_merged_adapter_gives_the_same_next_token_distribution(tiny_model_dir, tiny_adapter_dir):
    import torch

    from thai_grpo.models.loading import load_policy

    torch.manual_seed(0)
    unmerged = load_policy(tiny_model_dir, tiny_adapter_dir).eval()
    with torch.no_grad():  # a fresh LoRA's B is zero: give it weights so that merging changes W
        for name, parameter in unmerged.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.5)
    unmerged.save_pretrained(tiny_model_dir.parent / "trained-adapter")
    merged = load_policy(tiny_model_dir, tiny_model_dir.parent / "trained-adapter", merged=True).eval()
    plain = load_policy(tiny_model_dir, None).eval()
    ids = torch.tensor([[5, 17, 42, 99, 3]])
    with torch.no_grad():
        a, b, c = (model(input_ids=ids).logits for model in (unmerged, merged, plain))
    assert torch.allclose(a, b, atol=1e-5)
    assert not torch.allclose(a, c, atol=1e-3), "the adapter must change the model for this test to mean anything"
    assert not any("lora" in name for name, _ in merged.named_parameters())
