"""The benchmark's bookkeeping: overlapping stages, the GRPO step split, the sampler's bound on a tiny model."""

import itertools
import os
import time

import pytest

from thai_grpo_tools.bench import PARTS, max_concurrent, sampler_throughput, stage_shares, step_split


def test_max_concurrent_matches_a_brute_force_sweep():
    intervals = [(0, 10), (2, 5), (4, 8), (10, 12), (11, 13), (20, 21)]
    instants = [x / 2 for x in range(0, 50)]
    brute = max(sum(start <= t < end for start, end in intervals) for t in instants)  # half-open intervals
    assert max_concurrent(intervals) == brute == 3
    assert max_concurrent([(0, 1), (1, 2)]) == 1  # one job ends as the next starts: never two at once
    for subset in itertools.combinations(intervals, 2):
        assert max_concurrent(list(subset)) in (1, 2)


def test_step_split_skips_the_warm_up_and_shares_add_up_to_one():
    steps = [{**{p: 9.0 for p in PARTS}, "other": 9.0, "total": 63.0}]
    steps += [{**{p: float(i) for i, p in enumerate(PARTS, 1)}, "other": 0.5, "total": 21.5}] * 2
    split = step_split(steps)
    assert split["steps_timed"] == 2
    assert split["seconds"]["generation"] == 1.0 and split["seconds"]["total"] == 21.5
    assert sum(split["share"].values()) == pytest.approx(1.0)


def test_stage_shares_read_snakemake_benchmarks(tmp_path):
    now = time.time()
    for name, seconds, end in (("base_model", 100.0, now - 50), ("train-grpo", 40.0, now), ("sample-sft", 30.0, now)):
        path = tmp_path / f"{name}.tsv"
        path.write_text(f"s\th:m:s\n{seconds}\t0:00:00\n")
        os.utime(path, (end, end))
    shares = stage_shares(tmp_path)
    assert list(shares["stages"]) == ["base_model", "train-grpo", "sample-sft"]
    assert shares["sum_seconds"] == 170.0 and shares["stages"]["base_model"]["share"] == pytest.approx(100 / 170)
    assert shares["max_jobs_at_once"] == 2
    assert shares["seed_study"] == {"stages": 0, "seconds": 0}


def test_stage_shares_mark_the_seed_studys_stages(tmp_path):
    for name, seconds in (("train-grpo", 40.0), ("train-grpo-seed1", 41.0), ("sample-dr_grpo-seed2", 9.0),
                          ("score-rloo-seed12", 1.0), ("seed_results", 2.0), ("sample-temp0.3", 8.0)):
        (tmp_path / f"{name}.tsv").write_text(f"s\th:m:s\n{seconds}\t0:00:00\n")
    shares = stage_shares(tmp_path)
    assert [n for n, s in shares["stages"].items() if s["seed_study"]] == [
        "train-grpo-seed1", "sample-dr_grpo-seed2", "seed_results", "score-rloo-seed12"]
    assert shares["seed_study"] == {"stages": 4, "seconds": 53.0}


def test_sampler_throughput_counts_generated_tokens_and_its_bound(tiny_model_dir, tiny_adapter_dir):
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.models.loading import load_policy, load_tokenizer

    model = load_policy(tiny_model_dir, tiny_adapter_dir, merged=True).eval()
    row = sampler_throughput(model, load_tokenizer(tiny_model_dir), ["สมชายมีส้ม 3 ผล", "มานีมีส้ม 4 ผล"],
                             SYSTEM_PROMPT, num_samples=3, max_new_tokens=6, temperature=1.0, seed=0)
    assert row["sequences"] == 6 and 6 <= row["generated_tokens"] <= 36
    assert row["tokens_per_s"] > 0 and row["bound_tokens_per_s"] > 0
    assert row["ratio_to_bound"] == pytest.approx(row["bound_s"] / row["generate_s"])
