"""The sampling benchmark's pieces (thai_grpo_tools.sampling_bench): the order of its runs, its summary, and its
"before" path, which must be the path the decode loop replaced and must be put back (its timings are not tested)."""

from __future__ import annotations

from pathlib import Path

from thai_grpo_tools.sampling_bench import interleaved, path_before, summary

SHIPPED = Path(__file__).resolve().parents[1] / "assets" / "tiny-base"


def test_runs_interleave_so_that_neither_path_always_runs_first():
    assert interleaved(3) == ["before", "after", "after", "before", "before", "after"]
    assert interleaved(0) == []


def test_the_summary_is_the_medians_and_their_ratio():
    result = summary({"before": [3.0, 1.0, 2.0], "after": [1.0, 0.5, 9.0]})
    assert result["median_s"] == {"before": 2.0, "after": 1.0} and result["speedup"] == 2.0


def test_the_stage_gives_the_same_records_before_and_after(synthetic_rows):
    """Held-out sampling of the shipped tiny model, samples and greedy answers, through the path before the decode
    loop and through the loop: the same records; and the path before is put back afterwards."""
    import thai_grpo.models.sampling as sampling
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.models.loading import load_policy, load_tokenizer

    model = load_policy(SHIPPED / "base", SHIPPED / "sft_adapter", merged=True).eval()
    tokenizer = load_tokenizer(SHIPPED / "base")
    rows = [{"id": f"p{i}", "question": r["translated_question"], "answer": r["answer"]}
            for i, r in enumerate(synthetic_rows[:5])]
    own = sampling.sample_continuations

    def stage():
        return sampling.sample_heldout(model, tokenizer, rows, SYSTEM_PROMPT, 3, 20, 1.0, 2, seed=5)

    with path_before():
        assert sampling.sample_continuations is not own
        before = stage()
    assert sampling.sample_continuations == own
    assert stage() == before
