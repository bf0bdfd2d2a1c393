import json
from pathlib import Path

import pytest

from thai_grpo.data.problems import (DataSource, assert_no_leakage, deduplicate, drop_seen_in_training,
                                     extra_heldout_rows, extra_set_source, load_source_dataset, normalize_rows,
                                     number_answer_rows, parse_gold_answer, parse_gold_number, solution_steps,
                                     split_rows, sft_target, text_hash)
from thai_grpo.data.prompts import build_prompt

MGSM_STAND_IN = Path(__file__).resolve().parent / "fixtures" / "mgsm_th_small.jsonl"
MGSM_SPEC = {"source": "local", "path": str(MGSM_STAND_IN), "split": "test", "question_column": "question",
             "answer_column": "answer_number"}
WHERE = "eval.extra_sets.mgsm_th"


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
    assert sum(map(len, ids)) == len(set().union(*ids)) == 100  # held-out, train, sft, pretrain, reserved
    assert [len(a[name]) for name in ("heldout", "train", "sft", "pretrain", "reserved")] == [30, 20, 40, 10, 0]
    assert a["heldout"] == b["heldout"]
    assert split_rows(_rows(100), 42, 20, 30, 40) == a
    assert split_rows(_rows(100), 43, 20, 30, 40)["heldout"] != a["heldout"]


def test_split_refuses_sizes_larger_than_data():
    with pytest.raises(ValueError, match="lower the sizes"):
        split_rows(_rows(10), 42, train_size=8, heldout_size=8, sft_size=0)


def _skeleton_rows(n, skeletons):
    """n rows with distinct texts cycling through ``skeletons`` distinct skeletons (same arithmetic, other words)."""
    return [{"id": str(i), "question": f"คนที่ {i} มี {i % skeletons} ผล", "answer_text": "#### 1", "answer": 1,
             "skeleton": f"t:{i % skeletons}"} for i in range(n)]


def test_split_keeps_every_heldout_skeleton_out_of_all_training_sets():
    rows = _skeleton_rows(400, skeletons=50)
    split = split_rows(rows, seed=42, train_size=30, heldout_size=20, sft_size=40)
    heldout_skeletons = [r["skeleton"] for r in split["heldout"]]
    assert len(set(heldout_skeletons)) == len(heldout_skeletons) == 20  # one problem per skeleton
    for name in ("train", "sft", "pretrain"):
        assert not {r["skeleton"] for r in split[name]} & set(heldout_skeletons), name
    assert {r["skeleton"] for r in split["reserved"]} == set(heldout_skeletons)
    assert len(split["reserved"]) == 400 // 50 * 20 - 20  # the other rows of each held-out skeleton
    assert sum(len(part) for part in split.values()) == 400


def test_split_of_generated_problems_is_skeleton_disjoint_by_brute_force():
    from thai_grpo.data.synthetic import generate_problems

    rows, _ = normalize_rows(generate_problems(3000, seed=0, max_operand=5), "translated_question",
                             "translated_answer")
    split = split_rows(rows, seed=42, train_size=100, heldout_size=100, sft_size=200)
    for held in split["heldout"]:
        for name in ("train", "sft", "pretrain"):
            assert all(r["skeleton"] != held["skeleton"] for r in split[name])
    assert split["reserved"], "with operands <= 5 many problems share a held-out skeleton"
    assert_no_leakage(split["heldout"], train=split["train"], sft=split["sft"], pretrain=split["pretrain"])


def test_leakage_is_detected_by_skeleton_as_well_as_text():
    heldout = [{"question": "สมชาย มี ส้ม 3 ผล", "skeleton": "collect_more:3,4"}]
    assert_no_leakage(heldout, train=[{"question": "มานี มี ส้ม 3 ผล", "skeleton": "collect_more:3,5"}])
    with pytest.raises(ValueError, match="share their skeleton"):
        assert_no_leakage(heldout, train=[{"question": "มานี มี ส้ม 3 ผล", "skeleton": "collect_more:3,4"}])


def test_split_refuses_when_reserved_skeletons_leave_too_little_to_train_on():
    with pytest.raises(ValueError, match="lower the sizes"):
        split_rows(_skeleton_rows(100, skeletons=10), seed=0, train_size=5, heldout_size=10, sft_size=0)


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


# --------------------------------------------------------------------------- second held-out set (MGSM format)
@pytest.mark.parametrize("value, expected", [
    (18, 18), (18.0, 18), (-3.0, -3), ("18", 18), ("18.0", 18), (" 1,234 ", 1234), ("๑๘", 18),
    (18.5, None), ("18.5", None), ("", None), ("สิบแปด", None), (None, None), (True, None), (float("nan"), None),
    (float("inf"), None),
])
def test_parse_gold_number(value, expected):
    assert parse_gold_number(value) == expected


def test_mgsm_stand_in_loads_as_heldout_rows():
    """The real MGSM columns (question, answer_number, and null answer / equation_solution) through the same
    loader as the main data, into the rows sample_heldout reads; 18.0 is the integer 18."""
    source = extra_set_source(MGSM_SPEC)
    rows, stats = extra_heldout_rows(load_source_dataset(source, kind="held-out set"), MGSM_SPEC, WHERE)
    assert [r["answer"] for r in rows] == [7, 18, 16, 9] and all(type(r["answer"]) is int for r in rows)
    assert all(set(r) == {"id", "question", "answer_text", "answer"} for r in rows)
    assert all(parse_gold_answer(r["answer_text"]) == r["answer"] for r in rows)
    assert rows[0]["id"] == text_hash(rows[0]["question"])[:12]
    assert stats == {"source_rows": 4, "duplicates_removed": 0, "seen_in_training_dropped": 0, "problems": 4}


def test_extra_set_defaults_are_mgsm_thai_on_the_hub():
    source = extra_set_source({"path": "juletxara/mgsm", "name": "th"})
    assert source == DataSource("hub", "question", "answer_number", path="juletxara/mgsm", revision="main",
                                split="test", name="th")


def test_hub_extra_set_is_loaded_with_its_configuration_name(monkeypatch):
    import datasets

    calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **kwargs: calls.append((args, kwargs)) or [])
    load_source_dataset(extra_set_source({"path": "juletxara/mgsm", "name": "th", "revision": "abc"}))
    load_source_dataset(DataSource("hub", path="VISAI-AI/gsm8k-thai", revision="main"))
    assert calls == [(("juletxara/mgsm", "th"), {"revision": "abc", "split": "test"}),
                     (("VISAI-AI/gsm8k-thai", None), {"revision": "main", "split": "train"})]


@pytest.mark.parametrize("record, message", [
    ({"question": "ข้อหนึ่ง", "answer_number": 18.5}, r"row 1 has answer_number=18.5, not an integer"),
    ({"question": "ข้อหนึ่ง", "answer_number": None}, r"row 1 has answer_number=None, not an integer"),
    ({"question": " ", "answer_number": 3}, r"row 1 has an empty question"),
])
def test_a_bad_benchmark_row_is_refused_with_one_line(record, message):
    records = [{"question": "ข้อศูนย์", "answer_number": 1}, record]
    with pytest.raises(ValueError, match=message) as caught:
        number_answer_rows(records, "question", "answer_number", WHERE)
    assert "\n" not in str(caught.value) and WHERE in str(caught.value)


def test_extra_set_names_its_missing_columns():
    with pytest.raises(KeyError, match=r"set eval.extra_sets.mgsm_th.question_column"):
        number_answer_rows([{"translated_question": "q", "answer_number": 1}], "question", "answer_number", WHERE)


def test_questions_seen_in_training_are_dropped_and_counted():
    rows = number_answer_rows([{"question": f"โจทย์ข้อ {i}", "answer_number": i} for i in range(5)],
                              "question", "answer_number", WHERE)
    kept, dropped = drop_seen_in_training(rows, train=[{"question": " โจทย์ข้อ  1 "}], sft=[],
                                          pretrain=[{"question": "โจทย์ข้อ 3"}, {"question": "อื่น"}])
    assert [r["answer"] for r in kept] == [0, 2, 4] and dropped == 2


def test_a_second_set_with_skeletons_drops_problems_whose_skeleton_was_trained_on():
    records = [{"question": f"ปิติมีส้ม {i} ผล", "answer_number": i, "skeleton": f"t:{i}"} for i in range(4)]
    rows = number_answer_rows(records, "question", "answer_number", WHERE)
    kept, dropped = drop_seen_in_training(rows, train=[{"question": "มานีมีส้ม 2 ผล", "skeleton": "t:2"}])
    assert [r["answer"] for r in kept] == [0, 1, 3] and dropped == 1


def test_extra_set_counts_duplicates_and_leaks():
    records = [{"question": q, "answer_number": 1} for q in ["ก", "ก ", "ข", "ค"]]
    rows, stats = extra_heldout_rows(records, {"path": "x"}, WHERE, train=[{"question": "ข"}])
    assert [r["question"] for r in rows] == ["ก", "ค"]
    assert stats == {"source_rows": 4, "duplicates_removed": 1, "seen_in_training_dropped": 1, "problems": 2}


def test_an_extra_set_entirely_seen_in_training_is_refused():
    with pytest.raises(ValueError, match=r"eval.extra_sets.mgsm_th: none of its 1 problems is left"):
        extra_heldout_rows([{"question": "ก", "answer_number": 1}], {"path": "x"}, WHERE, train=[{"question": "ก"}])


def test_missing_extra_set_file_names_its_config_key(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"eval.extra_sets.mgsm_th.path .* does not exist"):
        load_source_dataset(extra_set_source({"source": "local", "path": str(tmp_path / "nope.jsonl")}),
                            where="eval.extra_sets.mgsm_th.path")


def test_sft_target_brief_thinks():
    text = "ได้ 2 + 3 = <<2+3=5>>5 ผล\nรวม 5 x 2 = 10 ผล\n#### 10"
    assert sft_target(text, 10, "empty") == "<think></think>\n10"
    assert sft_target(text, 10, "one_line") == "<think>\nรวม 5 x 2 = 10 ผล\n</think>\n10"
    assert sft_target(text, 10) == sft_target(text, 10, "full") == "<think>\nได้ 2 + 3 = 5 ผล\nรวม 5 x 2 = 10 ผล\n</think>\n10"
    with pytest.raises(ValueError, match="think='none'"):
        sft_target(text, 10, "none")
