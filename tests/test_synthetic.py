"""Tests for the synthetic Thai GSM8K-style generator (fast, CPU only)."""

import re

import pytest

from thai_grpo.data.problems import text_hash
from thai_grpo.data.synthetic import TEMPLATE_IDS, generate_problems, tidy_whitespace

STEP_RE = re.compile(r"(\d+) ([-+x/]) (\d+) = (?:<<(\d+)([-+*/])(\d+)=(\d+)>>)?(\d+)")
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b,
       "x": lambda a, b: a * b, "*": lambda a, b: a * b, "/": lambda a, b: a / b}
COLUMNS = {"translated_question", "translated_answer", "answer", "n_steps", "template", "skeleton"}


@pytest.fixture(scope="module")
def rows():
    return generate_problems(2000, seed=123)


def test_same_seed_identical_and_prefix():
    a = generate_problems(300, seed=7)
    assert a == generate_problems(300, seed=7)
    assert generate_problems(50, seed=7) == a[:50]


def test_different_seeds_differ():
    a = generate_problems(100, seed=1)
    b = generate_problems(100, seed=2)
    assert a != b
    qa = {r["translated_question"] for r in a}
    assert len(qa & {r["translated_question"] for r in b}) < 10


def test_schema_and_answer_line(rows):
    for r in rows:
        assert set(r) == COLUMNS
        assert isinstance(r["answer"], int) and r["answer"] >= 0
        lines = r["translated_answer"].split("\n")
        m = re.fullmatch(r"#### (\d+)", lines[-1])
        assert m, r["translated_answer"]
        assert int(m.group(1)) == r["answer"]
        assert r["translated_answer"].count("####") == 1
        assert r["template"] in TEMPLATE_IDS
        assert r["n_steps"] in (1, 2)
        assert r["skeleton"].startswith(r["template"] + ":")


def test_problems_with_one_skeleton_ask_the_same_arithmetic_in_other_words(rows):
    by_skeleton = {}
    for r in rows:
        by_skeleton.setdefault(r["skeleton"], []).append(r)
    shared = [group for group in by_skeleton.values() if len(group) > 1]
    assert shared, "2,000 problems with operands <= 20 repeat some skeletons"
    for group in shared:
        assert len({r["answer"] for r in group}) == 1
        assert len({r["translated_question"] for r in group}) == len(group)


def test_steps_recompute(rows):
    annotated = 0
    for r in rows:
        step_lines = r["translated_answer"].split("\n")[:-1]
        assert len(step_lines) == r["n_steps"]
        result = None
        for line in step_lines:
            found = STEP_RE.findall(line)
            assert len(found) == 1, line
            a, op, b, na, nop, nb, nc, c = found[0]
            value = OPS[op](int(a), int(b))
            assert value == int(c) and value >= 0, line  # exact division too
            if na:
                annotated += 1
                assert (na, nb, nc) == (a, b, c) and nop == ("*" if op == "x" else op)
            result = int(c)
        assert result == r["answer"]
        # the first step only uses numbers that appear in the question
        first = STEP_RE.search(step_lines[0])
        q_nums = re.findall(r"\d+", r["translated_question"])
        assert first.group(1) in q_nums and first.group(3) in q_nums
    n_lines = sum(r["n_steps"] for r in rows)
    assert 0.3 < annotated / n_lines < 0.7  # roughly half carry <<...>>


@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.5, 1.0])
def test_two_step_fraction(fraction):
    rs = generate_problems(1000, seed=5, two_step_fraction=fraction)
    share = sum(r["n_steps"] == 2 for r in rs) / len(rs)
    assert abs(share - fraction) < 0.06
    two_step_ids = {r["template"] for r in generate_problems(300, seed=0, two_step_fraction=1.0)}
    assert all(r["n_steps"] == (2 if r["template"] in two_step_ids else 1) for r in rs)


def test_unique_questions_and_many_templates(rows):
    assert len(rows) == 2000
    assert len({text_hash(r["translated_question"]) for r in rows}) == 2000
    assert len({r["template"] for r in rows}) >= 12
    assert len(TEMPLATE_IDS) >= 12


@pytest.mark.parametrize("max_operand", [5, 8, 20])
def test_operands_bounded(max_operand):
    for r in generate_problems(500, seed=3, max_operand=max_operand):
        nums = [int(x) for x in re.findall(r"\d+", r["translated_question"])]
        assert nums and max(nums) <= max_operand, r["translated_question"]
        assert r["answer"] >= 0


def test_questions_mostly_thai_ascii_digits(rows):
    for r in rows:
        for text in (r["translated_question"], r["translated_answer"]):
            letters = [ch for ch in text if ch.isalpha()]
            thai = [ch for ch in letters if "\u0e01" <= ch <= "\u0e5b"]
            assert len(thai) > len(letters) / 2, text
            assert not re.search("[\u0e50-\u0e59]", text)  # no Thai digits
            assert text == tidy_whitespace(text) or "\n" in text


def test_tidy_whitespace():
    assert tidy_whitespace("  ก  ข\n\tค ") == "ก ข ค"
    assert tidy_whitespace("e\u0301") == "\u00e9"


def test_template_space_too_small_raises():
    # share_equal with max_operand=5 only allows 4 / 2: a few hundred distinct questions.
    with pytest.raises(ValueError, match="unique questions"):
        generate_problems(2000, seed=0, max_operand=5, templates=["share_equal"])


def test_restricted_templates_and_bad_args():
    rs = generate_problems(50, seed=0, templates=["buy_total", "age_sum"])
    assert {r["template"] for r in rs} == {"buy_total", "age_sum"}
    assert generate_problems(0, seed=0) == []
    for kwargs in ({"max_operand": 2}, {"two_step_fraction": 1.5}, {"templates": ["nope"]}):
        with pytest.raises(ValueError):
            generate_problems(10, seed=0, **kwargs)
    with pytest.raises(ValueError):
        generate_problems(-1, seed=0)
