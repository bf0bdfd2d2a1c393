"""MGSM Thai from its original distribution (data/mgsm/mgsm_th.tsv: 250 human-translated problems, CC BY 4.0):
loading the headerless TSV, prompts built from its questions, answers parsed from completions, the Thai reward."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from thai_grpo.core.rewards import extract_answer, reward_breakdown, thai_reward
from thai_grpo.data.problems import (SUPPORTED_LOCAL_FORMATS, extra_heldout_rows, extra_set_source, load_source_dataset,
                                     read_question_answer_tsv)
from thai_grpo.data.prompts import build_prompt

REPO = Path(__file__).resolve().parents[1]
MGSM = REPO / "data" / "mgsm" / "mgsm_th.tsv"
REAL_CONFIG = yaml.safe_load((REPO / "config" / "qwen3-0.6b.yaml").read_text(encoding="utf-8"))
SPEC = REAL_CONFIG["eval"]["extra_sets"]["mgsm_th"]
WHERE = "eval.extra_sets.mgsm_th"


@pytest.fixture(scope="module")
def mgsm_rows():
    records = load_source_dataset(extra_set_source({**SPEC, "path": str(MGSM)}), where=f"{WHERE}.path")
    rows, stats = extra_heldout_rows(records, SPEC, WHERE)
    return rows, stats


def test_the_copy_carries_its_source_and_license():
    readme = (MGSM.parent / "README.md").read_text(encoding="utf-8")
    assert "CC BY 4.0" in readme and "Shi et al. 2022" in readme and "google-research/url-nlp" in readme
    assert "Creative Commons Attribution 4.0" in (MGSM.parent / "LICENSE").read_text(encoding="utf-8")


def test_real_config_reads_the_original_file():
    assert SPEC["source"] == "local" and (REPO / SPEC["path"]).resolve() == MGSM


def test_all_250_problems_load_with_integer_answers(mgsm_rows):
    rows, stats = mgsm_rows
    assert stats == {"source_rows": 250, "duplicates_removed": 0, "seen_in_training_dropped": 0, "problems": 250}
    assert all(isinstance(row["answer"], int) and row["answer_text"] == f"#### {row['answer']}" for row in rows)
    assert rows[0]["answer"] == 18 and rows[0]["question"].startswith("เป็ดของเจเน็ต")


def test_thousands_separators_are_read(mgsm_rows):
    raw = read_question_answer_tsv(MGSM)
    with_commas = [(q, a) for q, a in zip(raw["question"], raw["answer_number"]) if "," in a]
    assert [a for _, a in with_commas] == ["2,125", "114,200", "276,000", "5,600"]
    by_question = {row["question"]: row["answer"] for row in mgsm_rows[0]}
    assert [by_question[q] for q, _ in with_commas] == [2125, 114200, 276000, 5600]


def test_the_hub_copys_default_columns_read_the_tsv():
    """The TSV's columns are named as on juletxara/mgsm: an extra_sets entry needs no column settings for either."""
    records = load_source_dataset(extra_set_source({"source": "local", "path": str(MGSM)}))
    assert records.column_names == ["question", "answer_number"] and len(records) == 250


def test_unknown_suffix_is_one_line_naming_the_formats(tmp_path):
    path = tmp_path / "mgsm_th.xlsx"
    path.write_text("x")
    with pytest.raises(ValueError) as caught:
        load_source_dataset(extra_set_source({"source": "local", "path": str(path)}), where=f"{WHERE}.path")
    message = str(caught.value)
    assert "\n" not in message and f"{WHERE}.path" in message and "'.xlsx'" in message
    assert all(suffix in message for suffix in SUPPORTED_LOCAL_FORMATS) and "save_to_disk" in message


def test_a_line_without_one_tab_is_named(tmp_path):
    path = tmp_path / "broken.tsv"
    path.write_text("โจทย์ข้อหนึ่ง\t5\nโจทย์ข้อสองไม่มีคำตอบ\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken.tsv, line 2: 1 tab-separated fields, expected 2"):
        read_question_answer_tsv(path)


def test_blank_lines_and_windows_line_ends_are_tolerated(tmp_path):
    path = tmp_path / "crlf.tsv"
    path.write_bytes("ข้อหนึ่ง\t1,000\r\n\r\nข้อสอง\t2\r\n".encode("utf-8"))
    assert read_question_answer_tsv(path) == {"question": ["ข้อหนึ่ง", "ข้อสอง"], "answer_number": ["1,000", "2"]}


def test_prompt_from_a_real_problem_through_qwen3s_template(mgsm_rows):
    import trl
    from jinja2 import Template

    qwen3_chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text
    question = mgsm_rows[0][0]["question"]
    messages = build_prompt(question, REAL_CONFIG["data"]["system_prompt"])
    render = Template(qwen3_chat_template(encoding="utf-8"))
    on = render.render(messages=messages, add_generation_prompt=True, enable_thinking=True)
    off = render.render(messages=messages, add_generation_prompt=True, enable_thinking=False)
    assert on == (f"<|im_start|>system\n{REAL_CONFIG['data']['system_prompt']}<|im_end|>\n"
                  f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
    assert off == on + "<think>\n\n</think>\n\n"


@pytest.mark.parametrize("index", [0, 1, 2])
def test_answers_of_real_problems_are_graded(mgsm_rows, index):
    row = mgsm_rows[0][index]
    question, gold = row["question"], row["answer"]
    right = f"<think>\n{question}\nดังนั้นคำตอบคือ {gold:,}\n</think>\n\n{gold:,}"
    thai_digits = str(gold).translate(str.maketrans("0123456789", "๐๑๒๓๔๕๖๗๘๙"))
    assert extract_answer(right) == gold
    assert reward_breakdown(right, gold) == {"correct": 1.0, "format": 0.3, "thai": 0.2, "total": 1.5}
    assert extract_answer(f"<think>{question}</think>คำตอบ {thai_digits}") == gold
    # The question's own numbers sit inside the think block: a completion without a final number earns nothing.
    assert reward_breakdown(f"<think>\n{question}\n</think>\n\nไม่ทราบ", gold)["correct"] == 0.0


def test_real_questions_are_thai_script_and_their_english_translation_is_not(mgsm_rows):
    questions = [row["question"] for row in mgsm_rows[0]]
    assert all(thai_reward(question) == 0.2 for question in questions)
    english = "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning."
    assert thai_reward(english) == 0.0
    # A Thai question quoted inside mostly English reasoning no longer counts as Thai.
    assert thai_reward(f"<think>{english * 20}\n{questions[1]}</think>3") == 0.0
