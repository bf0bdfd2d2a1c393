"""Training texts of the offline model, so that its SFT policy is uncertain but capable. SFT examples carry
arithmetic slips, as translated solutions do: mass off the right result that a verifier-graded reward removes."""

from __future__ import annotations

import random
import re

# One GSM8K step: "a op b = <<a*b=c>>c" (the annotation is optional).
STEP = re.compile(r"(?<!\d)(\d+) ([x+\-/]) (\d+) = (?:<<[^<>]*>>)?(\d+)(?!\d)")
FINAL = re.compile(r"####\s*(-?\d+)\s*$")
OPERATIONS = {"x": lambda a, b: a * b, "+": lambda a, b: a + b, "-": lambda a, b: a - b,
              "/": lambda a, b: a // b if b and a % b == 0 else None}


def arithmetic_drills(max_operand: int) -> list[str]:
    """Every fact ``a op b = c`` with 1 <= a, b <= max_operand (subtraction and division kept non-negative, exact)."""
    operands = range(1, max_operand + 1)
    return [fact for a in operands for b in operands
            for fact in (f"{a} x {b} = {a * b}", f"{a} + {b} = {a + b}", f"{a + b} - {b} = {a}",
                         f"{a * b} / {b} = {a}")]


def solution_facts(answer_texts: list[str]) -> list[str]:
    """Every distinct step ``a op b = c`` of the given worked solutions (annotations dropped), sorted."""
    return sorted({f"{a} {op} {b} = {c}" for text in answer_texts for a, op, b, c in STEP.findall(text)})


def drill_texts(facts: list[str], per_text: int, repeats: int, seed: int) -> list[str]:
    """The facts ``repeats`` times, each in a new order, ``per_text`` to a text: a fixed order would be learned as a
    sequence, not as facts recallable anywhere."""
    rng = random.Random(seed)
    texts = []
    for _ in range(repeats):
        shuffled = list(facts)
        rng.shuffle(shuffled)
        texts += ["\n".join(shuffled[i:i + per_text]) for i in range(0, len(shuffled), per_text)]
    return texts


def add_arithmetic_slips(answer_text: str, rng: random.Random, rate: float) -> str:
    """Each step's result is wrong with probability ``rate``, later steps following it; a slip that would make a
    later step negative or inexact is skipped."""
    changed: dict[int, int] = {}
    impossible: list[str] = []

    def rewrite(match: re.Match) -> str:
        a, op, b, result = int(match[1]), match[2], int(match[3]), int(match[4])
        a = changed.get(a, a)  # GSM8K steps carry the previous result as their first operand
        new = OPERATIONS[op](a, b)
        if new is None or new < 0:
            impossible.append(match[0])
            return match[0]
        if rng.random() < rate:  # a plausible slip: off by 1 to 3, or by 10 (a carry error), never negative
            delta = rng.choice([-10, -3, -2, -1, 1, 2, 3, 10])
            new = new + delta if new + delta >= 0 else new - delta
        if new != result:
            changed[result] = new
        return f"{a} {op} {b} = {new}"

    lines = answer_text.split("\n")
    body = [STEP.sub(rewrite, line) for line in lines[:-1]]
    if impossible:
        return answer_text
    final = FINAL.sub(lambda m: f"#### {changed.get(int(m[1]), int(m[1]))}", lines[-1])
    return "\n".join(body + [final])


def noisy_solutions(rows: list[dict], slip_rate: float, seed: int) -> list[dict]:
    """Copies of ``rows`` whose ``answer_text`` carries slips (``answer`` follows the text): training rows only."""
    from thai_grpo.data.problems import parse_gold_answer

    rng = random.Random(seed)
    texts = [add_arithmetic_slips(row["answer_text"], rng, slip_rate) for row in rows]
    return [{**row, "answer_text": text, "answer": parse_gold_answer(text)} for row, text in zip(rows, texts)]


def brief_thinks(rows: list[dict], empty_share: float, one_line_share: float, seed: int) -> list[dict]:
    """Copies of ``rows``, ``empty_share`` not thinking and ``one_line_share`` writing only their last step: the
    reward-hacking experiment's SFT policy."""
    if empty_share < 0 or one_line_share < 0 or empty_share + one_line_share > 1:
        raise ValueError(f"empty_share={empty_share}, one_line_share={one_line_share}: each must be >= 0 and "
                         "their sum <= 1 (the rest of the examples think in full)")
    rng = random.Random(seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    n_empty, n_one = round(empty_share * len(rows)), round(one_line_share * len(rows))
    kinds = {i: "empty" for i in order[:n_empty]} | {i: "one_line" for i in order[n_empty:n_empty + n_one]}
    return [{**row, "think": kinds.get(i, "full")} for i, row in enumerate(rows)]
