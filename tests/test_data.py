import json

import pytest

from thai_grpo.data import (DataSource, assert_no_leakage, build_prompt, deduplicate, load_source_dataset,
                            normalize_rows, parse_gold_answer, solution_steps, split_rows, sft_target, text_hash)


@pytest.mark.parametrize("text, expected", [
    ("a\n#### 42", 42), ("#### 1,234", 1234), ("#### -7", -7), ("#### ๔๒", 42), ("x #### 1\n#### 2", 2),
    ("no marker 42", None), ("#### 4.5", None), ("#### abc", None), ("####", None),
])
def test_parse_gold_answer(text, expected):
    assert parse_gold_answer(text) == expected


def test_solution_steps_strips_calculator_annotations():
    assert solution_steps("ได้ 3 x 5 = <<3*5=15>>15 ผล\n#### 15") == "ได้ 3 x 5 = 15 ผล"


def test_sft_target_puts_reasoning_in_think_and_number_last():
    target = sft_target("ได้ 2 + 3 = <<2+3=5>>5 ผล\n#### 5", 5)
    assert target.startswith("<think>\n") and target.endswith("</think>\n5")


def test_prompt_is_system_then_user():
    assert [m["role"] for m in build_prompt("q")] == ["system", "user"]


def test_normalize_rows_drops_and_counts_unparseable():
    records = [{"q": "หนึ่ง", "a": "x\n#### 1"}, {"q": "สอง", "a": "no answer"}, {"q": "", "a": "#### 3"}]
    rows, dropped = normalize_rows(records, "q", "a")
    assert [r["answer"] for r in rows] == [1] and dropped == 2


def test_normalize_rows_names_missing_columns():
    with pytest.raises(KeyError, match="question_column"):
        normalize_rows([{"question": "q", "answer": "#### 1"}], "translated_question", "translated_answer")


def _rows(n):
    return [{"id": str(i), "question": f"โจทย์ข้อ {i}", "answer_text": f"#### {i}", "answer": i} for i in range(n)]


def test_split_is_disjoint_seeded_and_heldout_stable_when_train_size_changes():
    a = split_rows(_rows(100), seed=42, train_size=20, heldout_size=30, sft_size=40)
    b = split_rows(_rows(100), seed=42, train_size=10, heldout_size=30, sft_size=5)
    ids = [{r["id"] for r in part} for part in a.values()]
    assert sum(map(len, ids)) == len(set().union(*ids)) == 90
    assert a["heldout"] == b["heldout"]
    assert split_rows(_rows(100), 42, 20, 30, 40) == a
    assert split_rows(_rows(100), 43, 20, 30, 40)["heldout"] != a["heldout"]


def test_split_refuses_sizes_larger_than_data():
    with pytest.raises(ValueError, match="lower the sizes"):
        split_rows(_rows(10), 42, train_size=8, heldout_size=8, sft_size=0)


def test_leakage_is_detected_by_normalized_text():
    heldout = [{"question": "สมชาย มี  ส้ม 3 ผล"}]
    assert_no_leakage(heldout, train=[{"question": "อื่น"}])
    with pytest.raises(ValueError, match="held-out problem"):
        assert_no_leakage(heldout, train=[{"question": " สมชาย มี ส้ม 3 ผล "}])


def test_deduplicate_uses_normalized_hash():
    rows = [{"question": "ก  ข"}, {"question": "ก ข"}, {"question": "ค"}]
    assert len(deduplicate(rows)) == 2 and text_hash("A  b") == text_hash("a b")


def test_local_dataset_with_real_column_names_loads_like_the_hub_one(tmp_path, synthetic_rows):
    """The real run's loading path on a local stand-in: a JSONL file and a save_to_disk folder."""
    import datasets

    path = tmp_path / "gsm8k-thai.jsonl"
    real_columns = [{"translated_question": r["translated_question"], "translated_answer": r["translated_answer"]}
                    for r in synthetic_rows[:20]]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in real_columns))
    from_file = load_source_dataset(DataSource("local", path=str(path)))
    datasets.Dataset.from_list(real_columns).save_to_disk(str(tmp_path / "saved"))
    from_folder = load_source_dataset(DataSource("local", path=str(tmp_path / "saved")))
    for loaded in (from_file, from_folder):
        rows, dropped = normalize_rows(loaded, "translated_question", "translated_answer")
        assert dropped == 0 and [r["answer"] for r in rows] == [r["answer"] for r in synthetic_rows[:20]]


def test_missing_local_dataset_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_source_dataset(DataSource("local", path=str(tmp_path / "nope.jsonl")))
