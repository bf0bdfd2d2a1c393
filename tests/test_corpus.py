import random
import re

import pytest

from thai_grpo.data.corpus import STEP, add_arithmetic_slips, arithmetic_drills, drill_texts, solution_facts
from thai_grpo.data.problems import parse_gold_answer
from thai_grpo.data.synthetic import generate_problems


def steps_are_consistent(text: str) -> bool:
    """Every step's result equals its operation on its operands; the final answer is the last result."""
    results = []
    for line in text.split("\n")[:-1]:
        for a, op, b, c in STEP.findall(line):
            a, b, c = int(a), int(b), int(c)
            expected = {"x": a * b, "+": a + b, "-": a - b, "/": a // b}[op]
            results.append((expected, c))
    return bool(results) and parse_gold_answer(text) == results[-1][1]


def test_no_slips_at_rate_zero():
    for row in generate_problems(200, 1):
        assert add_arithmetic_slips(row["translated_answer"], random.Random(0), 0.0).split("\n")[-1] == \
            row["translated_answer"].split("\n")[-1]


def test_slips_propagate_to_the_final_answer():
    rows = generate_problems(500, 2)
    rng = random.Random(0)
    wrong = 0
    for row in rows:
        slipped = add_arithmetic_slips(row["translated_answer"], rng, 0.3)
        assert steps_are_consistent(slipped) or parse_gold_answer(slipped) is not None
        final_steps = [int(m[3]) for m in STEP.findall(slipped)]
        assert parse_gold_answer(slipped) == final_steps[-1]
        wrong += parse_gold_answer(slipped) != row["answer"]
    share_one_or_two_steps = wrong / len(rows)
    assert 0.25 < share_one_or_two_steps < 0.55  # 1 - 0.7 (one step) .. 1 - 0.49 (two steps)


def test_every_slip_is_non_negative():
    rng = random.Random(0)
    for row in generate_problems(300, 3):
        slipped = add_arithmetic_slips(row["translated_answer"], rng, 1.0)
        assert all(int(n) >= 0 for n in re.findall(r"-?\d+", re.sub(r"<<[^<>]*>>", "", slipped)))
        assert steps_are_consistent(slipped)


@pytest.mark.parametrize("max_operand", [3, 10])
def test_drills_cover_every_fact_once(max_operand):
    facts = arithmetic_drills(max_operand)
    assert len(facts) == len(set(facts)) == 4 * max_operand ** 2
    for fact in facts:
        a, op, b, c = STEP.fullmatch(fact).groups()
        assert {"x": int(a) * int(b), "+": int(a) + int(b), "-": int(a) - int(b), "/": int(a) // int(b)}[op] == int(c)
    texts = drill_texts(facts, 16, repeats=3, seed=0)
    assert sum(len(t.split("\n")) for t in texts) == 3 * len(facts)
    first, second = texts[:len(texts) // 3], texts[len(texts) // 3:2 * len(texts) // 3]
    assert first != second  # each repeat in a new order
    assert sorted("\n".join(first).split("\n")) == sorted(facts)  # each repeat holds every fact once
    assert drill_texts(facts, 16, 3, 0) == texts


def test_solution_facts_are_the_steps_of_the_solutions_without_annotations():
    rows = generate_problems(300, 4)
    facts = solution_facts([r["translated_answer"] for r in rows])
    assert facts == sorted(set(facts)) and "<<" not in "".join(facts)
    for fact in facts:
        a, op, b, c = STEP.fullmatch(fact).groups()
        assert {"x": int(a) * int(b), "+": int(a) + int(b), "-": int(a) - int(b), "/": int(a) // int(b)}[op] == int(c)
    every_step = {f"{a} {op} {b} = {c}" for r in rows for a, op, b, c in STEP.findall(r["translated_answer"])}
    assert set(facts) == every_step
    assert solution_facts(["no arithmetic here\n#### 3"]) == []


def test_brief_thinks_have_exact_seeded_shares():
    from thai_grpo.data.corpus import brief_thinks
    from thai_grpo.data.problems import sft_records

    rows = [{"question": f"q{i}", "answer_text": f"ได้ {i} + 1 = {i + 1} ผล\n#### {i + 1}", "answer": i + 1}
            for i in range(50)]
    brief = brief_thinks(rows, 0.2, 0.3, seed=3)
    kinds = [r["think"] for r in brief]
    assert (kinds.count("empty"), kinds.count("one_line"), kinds.count("full")) == (10, 15, 25)
    assert brief == brief_thinks(rows, 0.2, 0.3, seed=3) and kinds != [r["think"] for r in brief_thinks(rows, 0.2, 0.3, 4)]
    assert all({k: v for k, v in b.items() if k != "think"} == r for b, r in zip(brief, rows))
    turns = [rec["completion"][0]["content"] for rec in sft_records(brief, "S")]
    assert sum(t.startswith("<think></think>") for t in turns) == 10
    with pytest.raises(ValueError, match="sum <= 1"):
        brief_thinks(rows, 0.6, 0.5, seed=0)
