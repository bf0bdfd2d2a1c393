"""Deterministic synthetic Thai grade-school math problems in the columns of ``VISAI-AI/gsm8k-thai`` (GSM8K in Thai):
the offline config's stand-in for it, so that the whole pipeline runs offline and fast."""

from __future__ import annotations

import random
import re
import unicodedata
from typing import Callable, Sequence

from thai_grpo.data.problems import text_hash

NAMES = ("สมชาย", "สมหญิง", "มานี", "มานะ", "ปิติ", "ชูใจ", "วีระ", "ดวงใจ",
         "สมศักดิ์", "นภา", "กานดา", "ประเสริฐ", "วันดี", "สุดา", "อรุณ", "บุญมี")
# (noun, classifier)
ITEMS = (
    ("ส้ม", "ผล"), ("มะม่วง", "ผล"), ("แอปเปิล", "ผล"), ("ฝรั่ง", "ผล"), ("มังคุด", "ผล"),
    ("ลูกแก้ว", "ลูก"), ("ลูกบอล", "ลูก"), ("ลูกโป่ง", "ลูก"),
    ("สมุด", "เล่ม"), ("หนังสือการ์ตูน", "เล่ม"), ("ดินสอ", "แท่ง"), ("ยางลบ", "ก้อน"),
    ("ตุ๊กตา", "ตัว"), ("ลูกเจี๊ยบ", "ตัว"), ("ปลาทอง", "ตัว"),
    ("ขนมเค้ก", "ชิ้น"), ("คุกกี้", "ชิ้น"), ("สติกเกอร์", "แผ่น"), ("ไข่ไก่", "ฟอง"),
)
_PACKABLE = tuple(i for i in ITEMS if i[0] not in ("ลูกเจี๊ยบ", "ปลาทอง"))
CONTAINERS = ("กล่อง", "ถุง", "ตะกร้า", "ลัง", "แพ็ค")
# (how one travels, short verb for the solution line)
VEHICLES = (("ขี่จักรยาน", "ขี่จักรยาน"), ("ขับรถยนต์", "ขับรถ"), ("นั่งรถไฟ", "นั่งรถไฟ"),
            ("ขี่มอเตอร์ไซค์", "ขี่มอเตอร์ไซค์"))
MIN_MAX_OPERAND = 5


def tidy_whitespace(text: str) -> str:
    """NFC-normalize, collapse runs of whitespace to one space, strip."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()


def problem_skeleton(template: str, question: str) -> str:
    """The problem without its names and nouns, ``template:operand,operand,...`` (numbers in question order): two
    questions with the same skeleton ask the same arithmetic in other words."""
    return f"{template}:{','.join(re.findall(r'[0-9]+', question))}"


class _Draw:
    """Random choices for one problem, plus the arithmetic-line formatter."""

    def __init__(self, rng: random.Random, max_operand: int, annotate: bool):
        self.rng, self.m, self.annotate = rng, max_operand, annotate

    def num(self, lo: int = 2, hi: int | None = None) -> int:
        return self.rng.randint(lo, self.m if hi is None else hi)

    def names(self, k: int) -> list[str]:
        return self.rng.sample(NAMES, k)

    def item(self, packable: bool = False) -> tuple[str, str]:
        """A (noun, classifier); ``packable`` excludes live animals (no chicks in boxes)."""
        return self.rng.choice(_PACKABLE if packable else ITEMS)

    def pick(self, seq: Sequence):
        return self.rng.choice(seq)

    def calc(self, a: int, op: str, b: int) -> tuple[str, int]:
        """``"a op b = [<<a*b=c>>]c"`` and c; op is one of + - x /."""
        c = {"+": a + b, "-": a - b, "x": a * b, "/": a // b}[op]
        note = f"<<{a}{'*' if op == 'x' else op}{b}={c}>>" if self.annotate else ""
        return f"{a} {op} {b} = {note}{c}", c


# Each template returns (question, solution lines without "#### N", answer).
_Result = tuple[str, list[str], int]


# ---------------------------------------------------------------- one step
def _buy_total(d: _Draw) -> _Result:
    (n,), (it, cl) = d.names(1), d.item()
    a, p = d.num(), d.num(1)
    ask = d.pick(("ต้องจ่ายเงินทั้งหมดกี่บาท", "ต้องจ่ายเงินรวมกี่บาท"))
    e, c = d.calc(a, "x", p)
    return (f"{n}ซื้อ{it} {a} {cl} ราคา{cl}ละ {p} บาท {n}{ask}?",
            [f"{n}ซื้อ{it} {a} {cl} {cl}ละ {p} บาท ต้องจ่ายเงิน {e} บาท"], c)


def _collect_more(d: _Draw) -> _Result:
    (n1, n2), (it, cl) = d.names(2), d.item()
    a, b = d.num(1), d.num(1)
    start = d.pick((f"{n1}มี{it} {a} {cl}", f"{n1}เก็บ{it}ได้ {a} {cl}"))
    gift = d.pick((f"{n2}ให้{it}{n1}อีก {b} {cl}", f"แม่ซื้อ{it}ให้{n1}อีก {b} {cl}"))
    e, c = d.calc(a, "+", b)
    return (f"{start} {gift} ตอนนี้{n1}มี{it}ทั้งหมดกี่{cl}?",
            [f"{n1}มี{it}ทั้งหมด {e} {cl}"], c)


def _give_away(d: _Draw) -> _Result:
    (n1, n2), (it, cl) = d.names(2), d.item()
    a = d.num(3)
    b = d.num(1, a - 1)
    verb = d.pick(("ให้", "แบ่งให้"))
    e, c = d.calc(a, "-", b)
    return (f"{n1}มี{it} {a} {cl} {n1}{verb}{n2}ไป {b} {cl} {n1}เหลือ{it}กี่{cl}?",
            [f"{n1}เหลือ{it} {e} {cl}"], c)


def _share_equal(d: _Draw) -> _Result:
    (n,), (it, cl) = d.names(1), d.item()
    k = d.num(2, d.m // 2)
    q = d.num(2, d.m // k)
    who = d.pick(("เพื่อน", "น้อง", "นักเรียน"))
    e, c = d.calc(k * q, "/", k)
    return (f"{n}มี{it} {k * q} {cl} แบ่งให้{who} {k} คน คนละเท่าๆ กัน "
            f"{who}จะได้{it}คนละกี่{cl}?",
            [f"{who}ได้{it}คนละ {e} {cl}"], c)


def _age_older(d: _Draw) -> _Result:
    n1, n2 = d.names(2)
    a, b = d.num(), d.num(1)
    e, c = d.calc(a, "+", b)
    if d.rng.random() < 0.5:
        return (f"{n1}อายุ {a} ปี {n2}อายุมากกว่า{n1} {b} ปี {n2}อายุกี่ปี?",
                [f"{n2}อายุ {e} ปี"], c)
    return (f"ตอนนี้{n1}อายุ {a} ปี อีก {b} ปี {n1}จะอายุกี่ปี?",
            [f"อีก {b} ปี {n1}จะอายุ {e} ปี"], c)


def _pages_per_day(d: _Draw) -> _Result:
    (n,) = d.names(1)
    p, k = d.num(), d.num()
    e, c = d.calc(p, "x", k)
    return (f"{n}อ่านหนังสือวันละ {p} หน้า ติดต่อกัน {k} วัน {n}อ่านหนังสือไปทั้งหมดกี่หน้า?",
            [f"{n}อ่านหนังสือไป {e} หน้า"], c)


def _speed_distance(d: _Draw) -> _Result:
    (n,), (how, short) = d.names(1), d.pick(VEHICLES)
    v, h = d.num(), d.num(1, min(d.m, 10))
    e, c = d.calc(v, "x", h)
    return (f"{n}{how}ด้วยความเร็ว {v} กิโลเมตรต่อชั่วโมง เป็นเวลา {h} ชั่วโมง "
            f"{n}เดินทางได้ระยะทางกี่กิโลเมตร?",
            [f"{n}{short}ได้ระยะทาง {e} กิโลเมตร"], c)


def _boxes_items(d: _Draw) -> _Result:
    (n,), (it, cl), box = d.names(1), d.item(packable=True), d.pick(CONTAINERS)
    k, m = d.num(), d.num()
    e, c = d.calc(k, "x", m)
    return (f"{n}มี{it} {k} {box} แต่ละ{box}มี{it} {m} {cl} {n}มี{it}ทั้งหมดกี่{cl}?",
            [f"{n}มี{it}ทั้งหมด {e} {cl}"], c)


# ---------------------------------------------------------------- two steps
def _buy_change(d: _Draw) -> _Result:
    (n,), (it, cl) = d.names(1), d.item()
    a = d.num(2, d.m // 2)
    p = d.num(2, d.m // a)
    money = d.num(a * p)
    e1, c = d.calc(a, "x", p)
    e2, r = d.calc(money, "-", c)
    return (f"{n}มีเงิน {money} บาท ซื้อ{it} {a} {cl} ราคา{cl}ละ {p} บาท {n}จะเหลือเงินกี่บาท?",
            [f"ค่า{it}ทั้งหมด {e1} บาท", f"{n}เหลือเงิน {e2} บาท"], r)


def _two_items_cost(d: _Draw) -> _Result:
    (n,) = d.names(1)
    (it1, cl1), (it2, cl2) = d.rng.sample(ITEMS, 2)
    a, p, q = d.num(), d.num(1), d.num(1)
    e1, c = d.calc(a, "x", p)
    e2, t = d.calc(c, "+", q)
    return (f"{n}ซื้อ{it1} {a} {cl1} ราคา{cl1}ละ {p} บาท และซื้อ{it2}อีก 1 {cl2} ราคา {q} บาท "
            f"{n}ต้องจ่ายเงินทั้งหมดกี่บาท?",
            [f"ค่า{it1} {e1} บาท", f"รวมจ่ายเงิน {e2} บาท"], t)


def _collect_then_give(d: _Draw) -> _Result:
    (n1, n2, n3), (it, cl) = d.names(3), d.item()
    a, b = d.num(1), d.num(1)
    g = d.num(1, min(d.m, a + b))
    e1, s = d.calc(a, "+", b)
    e2, r = d.calc(s, "-", g)
    return (f"{n1}มี{it} {a} {cl} ได้รับจาก{n2}อีก {b} {cl} แล้วนำไปให้{n3} {g} {cl} "
            f"{n1}เหลือ{it}กี่{cl}?",
            [f"{n1}มี{it} {e1} {cl}", f"หลังจากให้{n3}แล้ว {n1}เหลือ{it} {e2} {cl}"], r)


def _age_sum(d: _Draw) -> _Result:
    n1, n2 = d.names(2)
    a = d.num(3)
    b = d.num(1, a - 1)
    e1, c = d.calc(a, "-", b)
    e2, t = d.calc(a, "+", c)
    return (f"{n1}อายุ {a} ปี {n2}อายุน้อยกว่า{n1} {b} ปี ทั้งสองคนอายุรวมกันกี่ปี?",
            [f"{n2}อายุ {e1} ปี", f"ทั้งสองคนอายุรวมกัน {e2} ปี"], t)


def _saving_money(d: _Draw) -> _Result:
    (n,), (it, _cl) = d.names(1), d.item()
    s, k = d.num(1), d.num()
    e1, t = d.calc(s, "x", k)
    p = d.num(1, min(d.m, t))
    e2, r = d.calc(t, "-", p)
    return (f"{n}เก็บเงินวันละ {s} บาท เป็นเวลา {k} วัน แล้วนำเงินไปซื้อ{it}ราคา {p} บาท "
            f"{n}จะเหลือเงินกี่บาท?",
            [f"{n}เก็บเงินได้ {e1} บาท", f"{n}เหลือเงิน {e2} บาท"], r)


def _boxes_share(d: _Draw) -> _Result:
    (n,), (it, cl), box = d.names(1), d.item(packable=True), d.pick(CONTAINERS)
    k, m = d.num(), d.num()
    e1, t = d.calc(k, "x", m)
    kids = d.pick([x for x in range(2, d.m + 1) if t % x == 0])
    e2, q = d.calc(t, "/", kids)
    return (f"{n}มี{it} {k} {box} {box}ละ {m} {cl} นำมาแบ่งให้เด็ก {kids} คน คนละเท่าๆ กัน "
            f"เด็กจะได้{it}คนละกี่{cl}?",
            [f"{n}มี{it}ทั้งหมด {e1} {cl}", f"เด็กได้{it}คนละ {e2} {cl}"], q)


def _pages_total(d: _Draw) -> _Result:
    (n,) = d.names(1)
    p, k, x = d.num(), d.num(), d.num(1)
    e1, t = d.calc(p, "x", k)
    e2, r = d.calc(t, "+", x)
    return (f"{n}อ่านหนังสือวันละ {p} หน้า เป็นเวลา {k} วัน แล้วอ่านเพิ่มอีก {x} หน้า "
            f"{n}อ่านหนังสือไปทั้งหมดกี่หน้า?",
            [f"ช่วงแรก{n}อ่านได้ {e1} หน้า", f"รวมแล้ว{n}อ่านไป {e2} หน้า"], r)


def _speed_two_legs(d: _Draw) -> _Result:
    (n,), (how, short) = d.names(1), d.pick(VEHICLES)
    v, h, w = d.num(), d.num(1, min(d.m, 10)), d.num(1)
    e1, t = d.calc(v, "x", h)
    e2, r = d.calc(t, "+", w)
    return (f"{n}{how}ด้วยความเร็ว {v} กิโลเมตรต่อชั่วโมง เป็นเวลา {h} ชั่วโมง "
            f"แล้วเดินต่ออีก {w} กิโลเมตร {n}เดินทางรวมกี่กิโลเมตร?",
            [f"{n}{short}ได้ระยะทาง {e1} กิโลเมตร", f"รวมระยะทาง {e2} กิโลเมตร"], r)


# id -> (n_steps, uses <<...>> annotations, builder)
_TEMPLATES: dict[str, tuple[int, bool, Callable[[_Draw], _Result]]] = {
    "buy_total": (1, True, _buy_total),
    "collect_more": (1, False, _collect_more),
    "give_away": (1, True, _give_away),
    "share_equal": (1, False, _share_equal),
    "age_older": (1, False, _age_older),
    "pages_per_day": (1, True, _pages_per_day),
    "speed_distance": (1, True, _speed_distance),
    "boxes_items": (1, False, _boxes_items),
    "buy_change": (2, True, _buy_change),
    "two_items_cost": (2, False, _two_items_cost),
    "collect_then_give": (2, True, _collect_then_give),
    "age_sum": (2, False, _age_sum),
    "saving_money": (2, True, _saving_money),
    "boxes_share": (2, False, _boxes_share),
    "pages_total": (2, True, _pages_total),
    "speed_two_legs": (2, False, _speed_two_legs),
}
TEMPLATE_IDS: tuple[str, ...] = tuple(_TEMPLATES)


def generate_problems(n: int, seed: int, *, max_operand: int = 20, two_step_fraction: float = 0.5,
                      templates: Sequence[str] | None = None) -> list[dict]:
    """Exactly ``n`` rows with unique normalized questions in gsm8k-thai's columns plus ``answer``, ``n_steps``,
    ``template`` and ``skeleton``; operands <= ``max_operand``; the rows for ``n`` prefix any larger ``n``'s."""
    if n < 0 or max_operand < MIN_MAX_OPERAND or not 0.0 <= two_step_fraction <= 1.0:
        raise ValueError(f"n={n!r}, max_operand={max_operand!r}, two_step_fraction={two_step_fraction!r}: use n >= 0, "
                         f"max_operand >= {MIN_MAX_OPERAND} and a fraction in [0, 1]")
    ids = list(TEMPLATE_IDS if templates is None else templates)
    unknown = [t for t in ids if t not in _TEMPLATES]
    if unknown or not ids:
        raise ValueError(f"unknown or empty templates {unknown or ids!r}; choose from {TEMPLATE_IDS}")
    pools = {k: [t for t in ids if _TEMPLATES[t][0] == k] for k in (1, 2)}

    rng = random.Random(seed)
    rows: list[dict] = []
    seen: set[str] = set()
    max_draws = 20 * n + 1000
    for _ in range(max_draws):
        if len(rows) >= n:
            break
        steps = 2 if rng.random() < two_step_fraction else 1
        tid = rng.choice(pools[steps] or pools[3 - steps])
        n_steps, annotate, build = _TEMPLATES[tid]
        question, lines, answer = build(_Draw(rng, max_operand, annotate))
        question = tidy_whitespace(question)
        if text_hash(question) in seen:  # the split's own notion of "the same problem"
            continue
        seen.add(text_hash(question))
        rows.append({"translated_question": question, "translated_answer": "\n".join([*lines, f"#### {answer}"]),
                     "answer": answer, "n_steps": n_steps, "template": tid,
                     "skeleton": problem_skeleton(tid, question)})
    if len(rows) < n:
        raise ValueError(f"could only generate {len(rows)} unique questions out of n={n} in {max_draws} attempts "
                         f"(max_operand={max_operand}, templates={ids}); lower n, raise max_operand or allow more "
                         "templates")
    return rows
