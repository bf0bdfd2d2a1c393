"""The benchmark's bookkeeping: the GRPO step split, the sampler's bound on a tiny model."""

import pytest

from thai_grpo_tools.bench import PARTS, sampler_throughput, step_split


def test_step_split_skips_the_warm_up_and_shares_add_up_to_one():
    steps = [{**{p: 9.0 for p in PARTS}, "other": 9.0, "total": 63.0}]
    steps += [{**{p: float(i) for i, p in enumerate(PARTS, 1)}, "other": 0.5, "total": 21.5}] * 2
    split = step_split(steps)
    assert split["steps_timed"] == 2
    assert split["seconds"]["generation"] == 1.0 and split["seconds"]["total"] == 21.5
    assert sum(split["share"].values()) == pytest.approx(1.0)


def test_sampler_throughput_counts_generated_tokens_and_its_bound(tiny_model_dir, tiny_adapter_dir):
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.models.loading import load_policy, load_tokenizer

    model = load_policy(tiny_model_dir, tiny_adapter_dir, merged=True).eval()
    row = sampler_throughput(model, load_tokenizer(tiny_model_dir), ["สมชายมีส้ม 3 ผล", "มานีมีส้ม 4 ผล"],
                             SYSTEM_PROMPT, num_samples=3, max_new_tokens=6, temperature=1.0, seed=0)
    assert row["sequences"] == 6 and 6 <= row["generated_tokens"] <= 36
    assert row["tokens_per_s"] > 0 and row["bound_tokens_per_s"] > 0
    assert row["ratio_to_bound"] == pytest.approx(row["bound_s"] / row["generate_s"])
