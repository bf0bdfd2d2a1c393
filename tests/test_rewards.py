"""Tests for thai_grpo.core.rewards against hand examples and the literal regex definitions."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings, strategies as st

from thai_grpo.core import rewards as R
from thai_grpo.core.rewards import (
    MAX_TOTAL,
    REWARD_FUNCTIONS,
    completion_text,
    correct,
    correctness_reward,
    extract_answer,
    format_reward,
    reward_breakdown,
    reward_functions,
    thai_reward,
    thai_script,
    think_format,
    think_format_lenient,
)


def total_reward(completion: str, gold: int, lenient_format: bool = False) -> float:
    """correctness_reward + format_reward + thai_reward, in [0, MAX_TOTAL = 1.5]."""
    return reward_breakdown(completion, gold, lenient_format)["total"]


def reference_extract(text: str) -> int | None:
    """The spec's definition, literally, on the whole answer section (fine for short texts)."""
    section = text.split("</think>")[-1].translate(R.THAI_DIGITS)
    matches = re.findall(r"-?[0-9][0-9,]*", section)
    if not matches:
        return None
    digits = matches[-1].replace(",", "")
    return None if len(digits.lstrip("-")) > R.MAX_ANSWER_DIGITS else int(digits)


def reference_format(text: str, lenient: bool) -> float:
    pattern = r"<think>.*?</think>" if lenient else r"<think>.+?</think>"
    return 0.3 if re.search(pattern, text, re.DOTALL) else 0.0


def reference_thai(text: str) -> float:
    alpha = [ch for ch in text if ch.isalpha()]
    thai = [ch for ch in alpha if "\u0e01" <= ch <= "\u0e5b"]
    return 0.2 if alpha and len(thai) > len(alpha) / 2 else 0.0


# --- extract_answer -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("คำตอบคือ ๔๒", 42),
        ("๑,๒๓๔ บาท", 1234),
        ("The answer is 1,234", 1234),
        ("ตอบ 12,", 12),
        ("อุณหภูมิ -7 องศา", -7),
        ("from 3 to 5", 5),
        ("3-5", -5),
        ("ไม่มีตัวเลข", None),
        ("", None),
        ("<think>คิดว่า 40 + 2 = 42</think>", None),
        ("<think>10 แล้ว 20</think> คำตอบ: 30", 30),
        ("<think>1</think><think>2</think> สรุป ๗", 7),
        ("<think>1</think> 5 <think>2</think> none", None),
        ("<think>unclosed 99", 99),
        ("١٢ full-width ４２", None),
        ("\x00\x01 7 \x7f", 7),
        ("\ud800 8 \udfff", 8),
    ],
)
def test_extract_answer_examples(text, expected):
    assert extract_answer(text) == expected


def test_huge_number_within_int_limit():
    text = "1" + "0" * 400
    assert extract_answer(text) == 10**400
    assert correctness_reward(text, 10**400) == 1.0
    assert correctness_reward(text, 1) == 0.0


def test_number_past_int_limit_is_no_answer():
    assert extract_answer("9" * 5000) is None
    assert extract_answer("๙" * 5000) is None
    assert extract_answer("1" * 4300) == int("1" * 4300)


def test_number_cut_by_tail_window_is_not_misread():
    pad = "x" * R.ANSWER_TAIL_CHARS
    assert extract_answer("-5" + pad[:-2]) == -5  # just inside the window
    assert extract_answer("-5" + pad[:-1]) is None  # sign cut off: unreadable, not +5
    assert extract_answer("12" + pad[:-1]) is None  # "1" outside, "2" inside: cannot read whole
    assert extract_answer("-" + pad[:-1] + "5") == 5
    assert extract_answer("7 " + pad + " 8") == 8


# --- format / thai --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "strict", "lenient"),
    [
        ("<think>คิด</think> 5", 0.3, 0.3),
        ("<think></think> 5", 0.0, 0.3),
        ("<think>\n</think>", 0.3, 0.3),
        ("<think>open only", 0.0, 0.0),
        ("</think> close first <think>", 0.0, 0.0),
        ("<think><think></think>", 0.3, 0.3),
        ("<think></think></think>", 0.3, 0.3),
        ("no tags", 0.0, 0.0),
    ],
)
def test_format_reward_strict_vs_lenient(text, strict, lenient):
    assert format_reward(text) == strict == reference_format(text, lenient=False)
    assert format_reward(text, lenient=True) == lenient == reference_format(text, lenient=True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("คำตอบคือ 42", 0.2),
        ("The answer is 42", 0.0),
        ("ดังนั้น answer = 42 บาท", 0.2),  # 11 Thai letters vs 6 Latin
        ("ab กข", 0.0),  # exactly half is not more than half
        ("abc กขค ง", 0.2),
        ("๑๒๓ 123 !!", 0.0),  # digits are not alphabetic
        ("", 0.0),
    ],
)
def test_thai_reward(text, expected):
    assert thai_reward(text) == expected == reference_thai(text)


def test_think_tags_count_as_latin_letters():
    # "think" twice = 10 Latin letters; a very short Thai answer is outvoted by its own tags.
    assert thai_reward("<think>คิด</think> ๕") == 0.0
    assert thai_reward("<think>คิดว่าสองบวกสาม</think> ๕") == 0.2


def test_breakdown_and_total():
    text = "<think>สองบวกสามเท่ากับห้า ๒ + ๓ = ๕</think> คำตอบคือ ๕"
    assert reward_breakdown(text, 5) == {"correct": 1.0, "format": 0.3, "thai": 0.2, "total": 1.5}
    assert total_reward("<think></think> 5", 5) == 1.0
    assert total_reward("<think></think> 5", 5, lenient_format=True) == pytest.approx(1.3)
    assert MAX_TOTAL == pytest.approx(1.5)


# --- robustness -----------------------------------------------------------------------

fragments = st.sampled_from(
    ["<think>", "</think>", "<think></think>", "๐", "๕", "๙", "ก", "-", ",", "1,234", "\ud800", "\x00", "a", " "]
)
texts = st.lists(st.one_of(st.text(st.characters(codec=None), max_size=20), fragments), max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(-(10**6), 10**6))
def test_rewards_are_total_and_bounded(text, gold):
    parts = reward_breakdown(text, gold)
    lenient = reward_breakdown(text, gold, lenient_format=True)
    assert parts["correct"] in (0.0, 1.0)
    assert parts["format"] in (0.0, 0.3) and lenient["format"] in (0.0, 0.3)
    assert parts["format"] <= lenient["format"]
    assert parts["thai"] in (0.0, 0.2)
    for total in (parts["total"], lenient["total"], total_reward(text, gold)):
        assert 0.0 <= total <= MAX_TOTAL + 1e-12


@settings(max_examples=300, deadline=None)
@given(texts)
def test_rewards_match_literal_definitions(text):
    assert extract_answer(text) == reference_extract(text)
    assert format_reward(text) == reference_format(text, lenient=False)
    assert format_reward(text, lenient=True) == reference_format(text, lenient=True)
    assert thai_reward(text) == reference_thai(text)


@pytest.mark.parametrize(
    "text",
    [
        "ก" * 2_500_000 + " 1,2 " * 500_000,  # ~5 MB
        "<think>" * 700_000,  # quadratic for a naive lazy regex
        "<think>" + "9," * 2_500_000,
        "\ud800" * 5_000_000,
    ],
    ids=["thai-and-numbers", "many-open-tags", "long-comma-number", "surrogates"],
)
def test_megabyte_completions_are_fast(text):
    start = time.perf_counter()
    parts = reward_breakdown(text, 12)
    assert 0.0 <= parts["total"] <= MAX_TOTAL
    assert time.perf_counter() - start < 5.0  # ~0.3 s here; generous for shared CPUs


def test_non_string_inputs_do_not_raise():
    for value in (None, b"\xff 5", 42, ["x"]):
        assert 0.0 <= total_reward(value, 5) <= MAX_TOTAL
    assert extract_answer(b"\xff 5") == 5


# --- TRL reward functions -------------------------------------------------------------


def test_completion_text_forms():
    assert completion_text("plain") == "plain"
    assert completion_text([{"role": "assistant", "content": "ตอบ 5"}]) == "ตอบ 5"
    assert completion_text([{"role": "assistant", "content": [{"type": "text", "text": "ก"}]}]) == "ก"
    assert completion_text([]) == ""
    assert completion_text(None) == ""


def test_trl_functions_on_both_completion_forms():
    plain = ["<think>คิดว่าสองบวกสาม</think> ๕", "<think></think> 4", "The answer is 5"]
    chat = [[{"role": "assistant", "content": text}] for text in plain]
    for completions in (plain, chat):
        kwargs = {"prompts": ["p"] * 3, "completions": completions, "answer": [5, 4, 6]}
        assert correct(**kwargs) == [1.0, 1.0, 0.0]
        assert think_format(**kwargs) == [0.3, 0.0, 0.0]
        assert think_format_lenient(**kwargs) == [0.3, 0.3, 0.0]
        assert thai_script(**kwargs) == [0.2, 0.0, 0.0]


def test_reward_function_registry_and_names():
    assert [f.__name__ for f in REWARD_FUNCTIONS.values()] == list(REWARD_FUNCTIONS)
    assert reward_functions(["thai", "correct"]) == [thai_script, correct]
    with pytest.raises(ValueError, match=r"'nope'.*correct, format, format_lenient, thai") as error:
        reward_functions(["correct", "nope"])
    assert "\n" not in str(error.value)


def test_the_registry_is_the_one_list_of_rewards():
    """A reward is added by one entry of rewards.REWARDS: the config's schema lists the same names (tests/test_config.py
    checks both lists), TRL's logged names and the report's words all follow it."""
    from thai_grpo.report import run_words

    assert REWARD_FUNCTIONS == {name: reward.function for name, reward in R.REWARDS.items()}
    assert run_words.REWARD_WORDS == {name: reward.words for name, reward in R.REWARDS.items()}
    assert run_words.reward_words(["correct", "thai"]) == "correct answer +1.0, Thai script +0.2"


def test_five_megabyte_completion_is_graded():
    text = "<think>" + "คิด 1 2 3 " * 500_000 + "</think> คำตอบคือ ๔๒"
    assert len(text.encode()) > 5_000_000
    assert reward_breakdown(text, 42) == {"correct": 1.0, "format": 0.3, "thai": 0.2, "total": 1.5}


# --- think-block content: the hacks and the content-checked format ---------------------


def reference_think_content(text: str) -> str | None:
    """What the lenient regex captures from the first <think>, literally."""
    first = text.find("<think>")
    match = re.compile(r"<think>(.*?)</think>", re.DOTALL).match(text, first) if first >= 0 else None
    return None if match is None else match.group(1)


@pytest.mark.parametrize(
    ("text", "empty", "blank", "worked"),
    [
        ("<think></think>\n12", True, False, False),
        ("<think> </think>12", False, True, False),
        ("<think>\n\n</think>\n12", False, True, False),  # Qwen3's non-thinking block
        ("<think>.</think>12", False, True, False),
        ("<think> ก </think>12", False, True, False),
        ("<think>ห้า</think>5", False, False, False),  # words without a calculation
        ("<think>\nรวมกัน 8 + 6 = 14 ปี\n</think>\n14", False, False, True),
        ("<think>๘ x ๖ = ๔๘</think>48", False, False, True),  # Thai digits
        ("<think>1 + 1 = 2</think>7", False, False, True),  # the content check's own stated loophole
        ("<think>8 + 6 = 14", False, False, False),  # cut at the budget: never closed
        ("8 + 6 = 14 <think></think>", True, False, False),
        ("no tags 8 + 6 = 14", False, False, False),
    ],
)
def test_think_content_kinds_and_checked_format(text, empty, blank, worked):
    from thai_grpo.core.rewards import empty_think

    assert R.think_content(text) == reference_think_content(text)
    assert empty_think(text) == empty and R.blank_think(text) == blank and R.hollow_think(text) == (empty or blank)
    assert R.worked_think_block(text) == worked
    assert R.checked_format_reward(text) == (0.3 if worked else 0.0)
    if blank:  # the strict regex pays every blank block, the checked one never does
        assert format_reward(text) == 0.3


@settings(max_examples=300, deadline=None)
@given(texts)
def test_think_content_matches_the_regex_and_checked_format_is_bounded(text):
    content = reference_think_content(text)
    assert R.think_content(text) == content
    assert R.hollow_think(text) == (content is not None and len(content.strip()) <= 1)
    assert R.checked_format_reward(text) <= format_reward(text, lenient=True)  # needs a closed block


@pytest.mark.parametrize("text", ["<think>" + "9" * 2_000_000 + "</think>", "<think>1" + " " * 2_000_000 + "</think>",
                                  "<think>" + "1 + " * 1_000_000 + "</think>"])
def test_checked_format_is_fast_on_long_blocks(text):
    start = time.perf_counter()
    R.checked_format_reward(text)
    assert time.perf_counter() - start < 5.0  # ~0.1 s here


def test_checked_format_trl_function():
    completions = ["<think>\n2 + 3 = 5\n</think>\n5", "<think> </think>5", [{"role": "assistant", "content": "x"}]]
    assert REWARD_FUNCTIONS["format_checked"](prompts=["p"] * 3, completions=completions) == [0.3, 0.0, 0.0]
    assert reward_functions(["format_checked"])[0].__name__ == "format_checked"
