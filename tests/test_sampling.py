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


# ----------------------------------------------------------------------------------------- seeded per sample
SHIPPED = __import__("pathlib").Path(__file__).resolve().parents[1] / "assets" / "tiny-base"


@pytest.fixture(scope="module")
def shipped_policy():
    from thai_grpo.models.loading import load_policy, load_tokenizer

    model = load_policy(SHIPPED / "base", SHIPPED / "sft_adapter", merged=True).eval()
    return model, load_tokenizer(SHIPPED / "base")


@pytest.fixture(scope="module")
def heldout_rows(synthetic_rows):
    return [{"id": f"p{i}", "question": r["translated_question"], "answer": r["answer"]}
            for i, r in enumerate(synthetic_rows[:6])]


def test_a_row_draws_from_the_tempered_softmax():
    """Each row's inverse-CDF draw at its counter-based uniform, over 10,000 rows of one logits vector (and again at
    another column), against softmax(logits / T): a chi-square test that passes at T and fails at the wrong
    temperature (the test can fail); a token of probability 0 is never drawn."""
    import torch
    from scipy.stats import chisquare

    from thai_grpo.models.sampling import CounterSampler

    logits, temperature, draws = torch.tensor([2.0, 1.0, -float("inf"), 0.0, -1.0, 0.5]), 0.7, 10000
    sampler, rows = CounterSampler(temperature, list(range(draws)), "cpu"), torch.arange(draws)
    for column in (0, 37):
        counts = torch.bincount(sampler.choose(logits.repeat(draws, 1), rows, column), minlength=len(logits))
        assert counts[2] == 0
        counts = counts[torch.arange(len(logits)) != 2].numpy()
        for tried, should_pass in ((temperature, True), (1.0, False)):
            expected = torch.softmax(logits.double() / tried, -1).numpy()
            expected = expected[[0, 1, 3, 4, 5]] * draws
            assert (chisquare(counts, expected).pvalue > 1e-3) == should_pass, (tried, counts, expected)


def test_counter_uniforms_are_uniform_and_unrelated_across_rows_and_columns():
    """The hashed uniforms of 20,000 seeds x 3 columns: in [0, 1), evenly spread over 50 bins, and no correlation
    above noise between neighbouring seeds or columns."""
    import numpy as np
    import torch
    from scipy.stats import chisquare

    from thai_grpo.models.sampling import counter_uniforms, row_seeds

    seeds = torch.tensor(row_seeds(5, range(20000), 1))
    draws = torch.stack([counter_uniforms(seeds, column) for column in range(3)]).numpy()
    assert draws.min() >= 0 and draws.max() < 1
    assert chisquare(np.histogram(draws, bins=50, range=(0, 1))[0]).pvalue > 1e-3
    for a, b in ((draws[0], draws[1]), (draws[1], draws[2]), (draws[0, :-1], draws[0, 1:])):
        assert abs(np.corrcoef(a, b)[0, 1]) < 0.03
    assert torch.equal(counter_uniforms(seeds, torch.tensor(2)), counter_uniforms(seeds, 2))  # on the device or not


def test_a_row_draws_the_same_token_whatever_its_batch_mates():
    import torch

    from thai_grpo.models.sampling import CounterSampler, row_seeds

    seeds = row_seeds(1234, ["a", "b", "c"], 2)
    assert len(set(seeds)) == 6 and seeds == row_seeds(1234, ["a", "b", "c"], 2)
    scores = torch.zeros(6, 1000)
    together = CounterSampler(1.0, seeds, "cpu").choose(scores, torch.arange(6), torch.tensor(3))
    alone = torch.cat([CounterSampler(1.0, [seed], "cpu").choose(scores[:1], torch.tensor([0]), 3)
                       for seed in seeds])
    assert torch.equal(together, alone)
    assert not torch.equal(together, CounterSampler(1.0, seeds, "cpu").choose(scores, torch.arange(6), 4))
    with pytest.raises(ValueError, match="one seed per generated row"):
        CounterSampler(1.0, seeds[:2], "cpu")(torch.zeros(6, 1, dtype=torch.long), scores)


def test_the_batch_size_changes_no_sample(shipped_policy, heldout_rows):
    """Held-out sampling on the shipped tiny base + SFT adapter: batch sizes 1, 2 and 8 give the same samples and
    greedy answers token for token; another seed gives other samples (so the comparison means something)."""
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.models.sampling import sample_heldout

    model, tokenizer = shipped_policy

    def tokens(batch_size: int, seed: int = 1234):
        records = sample_heldout(model, tokenizer, heldout_rows, SYSTEM_PROMPT, 2, 10, 1.0, batch_size, seed)
        return [([c["token_ids"] for c in r["completions"]], r["greedy"]["token_ids"]) for r in records]

    one = tokens(1)
    assert tokens(2) == one and tokens(8) == one
    assert len({tuple(ids) for sampled, _ in one for ids in sampled}) > len(heldout_rows)  # samples differ
    assert [s for s, _ in tokens(8, seed=99)] != [s for s, _ in one]


def test_the_preference_pairs_sampling_is_seeded_per_problem(shipped_policy, heldout_rows):
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.methods.preferences import sample_training_problems

    model, tokenizer = shipped_policy
    runs = [[[c["token_ids"] for c in r["completions"]] for r in sample_training_problems(
        model, tokenizer, heldout_rows[:3], SYSTEM_PROMPT, 2, 8, 1.0, batch_size, 42)] for batch_size in (1, 3)]
    assert runs[0] == runs[1]
