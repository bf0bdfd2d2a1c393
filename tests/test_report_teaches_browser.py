"""The report teaches the chapter, checked in headless Chromium at 1280 x 800: the lessons and Figures 5.1-5.3 come
before the appendix, which starts within 12 screens; one colour per meaning (a higher verdict green, a lower one red)
in every table and legend that marks a direction; and the samples side by side, one problem per row and one model per
column with the rewards under each answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_documents import offline_document
from test_report_layout_browser import SMOKE_RUN, driver  # noqa: F401  (the fixture: headless Chromium, or a skip)
from workflow import load_report_fixture

from thai_grpo.report import figures
from thai_grpo.report.figures import draw_all
from thai_grpo.report.figures_gains import VERDICT_COLOURS
from thai_grpo.report.glance import prose_names
from thai_grpo.report.html import write_report
from thai_grpo.report.lessons import SIDE_BY_SIDE_PROBLEMS
from thai_grpo.report.rollouts import pitfall_numbers

ROOT = Path(__file__).resolve().parent.parent
SCREEN = (1280, 800)
BODY_SCREENS = 12  # the body before the appendix fits 12 screens of 1280 x 800
PAGE_SCREENS = 15  # the whole page, its appendix closed as it loads: 12,000 px
SENTENCE = 100  # no sentence this long is said twice
FIGURES_IN_BODY = ("Figure 5.1", "Figure 5.2", "Figure 5.3, synthetic", "Figure 5.3, real")

pytestmark = pytest.mark.browser


def rgb(hex_colour: str) -> str:
    """'#2b8a3e' -> 'rgb(43, 138, 62)', as getComputedStyle writes a colour."""
    value = hex_colour.lstrip("#")
    return "rgb({}, {}, {})".format(*(int(value[i:i + 2], 16) for i in (0, 2, 4)))


def with_pitfall_numbers(results: dict) -> dict:
    """results.json as the results rule now writes it: train.pitfalls from the run's rollouts. The fixture predates
    it, so its stored groups stand in for the rollouts (each a group of G in TRL's order)."""
    groups = [g for g in results["train"]["example_groups"].values() if g.get("completions")]
    rollouts = [{"completion": c, "reward": r} for g in groups for c, r in zip(g["completions"], g["rewards"])]
    results["train"]["pitfalls"] = pitfall_numbers(rollouts, len(groups[0]["rewards"]))
    return results


def render(results: dict, out: Path) -> str:
    results = with_pitfall_numbers(results)
    _, samples = load_report_fixture()
    write_report(results, samples, draw_all(results, out / "figures"), ROOT / "report", out / "report.html")
    return (out / "report.html").as_uri()


@pytest.fixture(scope="module")
def smoke_page(tmp_path_factory):
    """The smoke run's report, as the layout test renders it."""
    return render(json.loads(SMOKE_RUN.read_text(encoding="utf-8")), tmp_path_factory.mktemp("teaches-smoke"))


@pytest.fixture(scope="module")
def verdict_page(tmp_path_factory):
    """The offline default's document: its methods are higher, level and lower than SFT under the plan."""
    return render(offline_document(), tmp_path_factory.mktemp("teaches-verdicts"))


def load(driver, url: str):  # noqa: F811
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": SCREEN[0], "height": SCREEN[1], "deviceScaleFactor": 1, "mobile": False})
    driver.get(url)


def test_the_appendix_starts_within_twelve_screens_with_the_chapters_figures_above_it(driver, smoke_page):  # noqa: F811
    load(driver, smoke_page)
    layout = driver.execute_script("""
        const top = (e) => e.getBoundingClientRect().top + window.scrollY;
        const figures = Object.fromEntries(Array.from(document.querySelectorAll("figure img"))
                                           .map((img) => [img.alt, top(img)]));
        return {appendix: top(document.getElementById("appendix")), figures: figures,
                page: document.documentElement.scrollHeight};""")
    print(f"\n#appendix at {layout['appendix']:.0f} px of {layout['page']} px")
    assert layout["appendix"] <= BODY_SCREENS * SCREEN[1], \
        f"the body is {layout['appendix']:.0f} px tall, more than {BODY_SCREENS} screens of {SCREEN[1]} px"
    for alt in FIGURES_IN_BODY:
        assert alt in layout["figures"], f"{alt} is not drawn"
        assert layout["figures"][alt] < layout["appendix"], f"{alt} is in the appendix"


FIGURE_SIZES = """
const top = (e) => e.getBoundingClientRect().top + window.scrollY;
const appendix = top(document.getElementById("appendix"));
return Array.from(document.querySelectorAll("figure img")).filter((img) => top(img) < appendix)
  .map((img) => ({alt: img.alt, shown: img.getBoundingClientRect().width, natural: img.naturalWidth}));
"""


def test_every_figure_of_the_learning_path_is_shown_at_four_fifths_of_its_width_or_more(driver, smoke_page,  # noqa: F811
                                                                                         verdict_page):
    """A figure drawn 1,650 px wide and shown in 960 px has 4-5 px labels: every figure above the appendix is shown
    at 80% of its natural width or more, on the smoke run's page (with the real-token KL figure) and the default's."""
    for page in (smoke_page, verdict_page):
        load(driver, page)
        sizes = driver.execute_script(FIGURE_SIZES)
        assert {"Figure 5.1", "Figure 5.2"} <= {f["alt"] for f in sizes}
        small = [f for f in sizes if f["shown"] < 0.8 * f["natural"]]
        assert not small, f"shown below 80% of their width: {small}"


def test_the_first_screen_says_it_is_one_training_seed_and_which_problems(driver, verdict_page):  # noqa: F811
    load(driver, verdict_page)
    caveat = driver.execute_script("""const e = document.getElementById("caveat");
        return {text: e.textContent, bottom: e.getBoundingClientRect().bottom};""")
    assert "One training run per method (seed 42)" in caveat["text"] and "synthetic" in caveat["text"]
    assert caveat["bottom"] <= SCREEN[1], caveat


@pytest.fixture(scope="module")
def ppo_page(tmp_path_factory):
    """The default's document with the reward model the offline run trains for PPO: near chance on held-out pairs."""
    results = offline_document()
    results["reward_model"] = {"train": {"pairs": 168, "accuracy": 0.62},
                               "heldout": {"pairs": 168, "accuracy": 0.506, "problems": 200}}
    return render(results, tmp_path_factory.mktemp("teaches-ppo"))


WHY = """
const top = (e) => e ? e.getBoundingClientRect().top + window.scrollY : null;
const why = document.getElementById(arguments[0]);
return {appendix: top(document.getElementById("appendix")), top: top(why), text: why && why.textContent};
"""


def test_each_departure_from_the_chapter_has_its_why_above_the_appendix(driver, ppo_page, smoke_page):  # noqa: F811
    """PPO lower than SFT (the default's reward model is near chance), greedy accuracy level while pass@1 rises, and
    k1 more precise than k3 (the smoke run's tokens): each reason is in the learning path, not only in the appendix."""
    load(driver, ppo_page)
    ppo = driver.execute_script(WHY, "ppo-why")
    assert ppo["top"] is not None and ppo["top"] < ppo["appendix"]
    assert "reward model orders 50.6% of 168 held-out pairs" in ppo["text"], ppo["text"]
    evidence = [f for f in driver.execute_script(FIGURE_SIZES) if f["alt"].startswith("PPO: its reward model's score")]
    assert evidence, "the evidence figure (PPO's score against the code reward) is not above the appendix"
    greedy = driver.execute_script(WHY, "greedy-why")  # the default's GRPO: pass@1 higher, greedy accuracy not
    assert greedy["top"] is not None and greedy["top"] < greedy["appendix"]
    assert "sharpening" in greedy["text"] and "greedy accuracy" in greedy["text"], greedy["text"]
    load(driver, smoke_page)
    kl = driver.execute_script(WHY, "kl-takeaway")
    assert kl["top"] is not None and kl["top"] < kl["appendix"]
    assert "depends on the regime" in kl["text"] and "k1 where they diverge" in kl["text"], kl["text"]


def test_a_stored_group_loads_into_the_calculator_and_gives_its_runs_advantages(driver, smoke_page):  # noqa: F811
    """GRPO's and Dr.GRPO's first groups are the same completions with two rules, shown together above the appendix;
    each one's button puts its rewards and rule into the calculator, which then gives that run's advantages."""
    load(driver, smoke_page)
    pair = driver.execute_script(WHY, "same-group")
    assert pair["top"] is not None and pair["top"] < pair["appendix"] and "One group, two rules" in pair["text"]
    rows = driver.execute_script("""return Array.from(document.querySelectorAll("table.same-group tr")).slice(2)
        .map((row) => Array.from(row.querySelectorAll("td.adv")).map((td) => td.textContent.trim()));""")
    buttons = driver.find_elements("css selector", "table.same-group button.calc-load")
    assert len(rows) == len(buttons) == 2
    for row, button in zip(rows, buttons):
        divide = button.get_attribute("data-divide") == "true"
        driver.execute_script("arguments[0].click();", button)
        state = driver.execute_script("""return {rewards: document.getElementById("calc-rewards").value,
            divide: document.getElementById("calc-divide-std").checked,
            advantages: Array.from(document.querySelectorAll("#calc-output td.adv")).map((td) => td.textContent)};""")
        assert state["rewards"] == button.get_attribute("data-rewards") and state["divide"] is divide
        assert [float(a) for a in state["advantages"]] == pytest.approx([float(a) for a in row], abs=0.011), (row, state)
    assert rows[0] != rows[1]  # the two rules give two sets of advantages


# Every element that marks a direction, with its computed colour: verdict words and cells (headline, results table,
# pairwise tables), the per-problem transitions, and the advantages of the groups and of the calculator.
COLOURS = """
const marked = Array.from(document.querySelectorAll(
  ".verdict.higher, .verdict.lower, .verdict-word.higher, .verdict-word.lower, " +
  "td.higher, td.lower, td.adv.pos, td.adv.neg"));
return marked.map((e) => ({up: e.matches(".higher, .pos"), colour: getComputedStyle(e).color,
                           where: (e.closest("section, header") || {}).id || "", text: e.textContent.trim()}));
"""


def test_higher_is_green_and_lower_is_red_in_every_table_and_legend(driver, verdict_page):  # noqa: F811
    load(driver, verdict_page)
    marked = driver.execute_script(COLOURS)
    green, red = rgb(VERDICT_COLOURS["higher"]), rgb(VERDICT_COLOURS["lower"])
    wrong = [m for m in marked if m["colour"] != (green if m["up"] else red)]
    assert not wrong, f"a direction in the wrong colour: {wrong[:5]}"
    places = {(m["where"], m["up"]) for m in marked}
    assert ("glance", True) in places, "the headline's verdict (GRPO higher than SFT here) is not marked"
    for where in ("methods", "statistics", "polish"):  # the results table, the pairwise tables, the transitions
        assert (where, True) in places and (where, False) in places, f"#{where} marks no higher and lower: {places}"
    # the figures draw with the same two colours: the gains plot's verdicts, the advantages' and the scatter's signs
    assert (figures.POSITIVE, figures.NEGATIVE) == (VERDICT_COLOURS["higher"], VERDICT_COLOURS["lower"])


SIDE_BY_SIDE = """
const table = document.getElementById("samples-side-by-side");
if (!table) return null;
const heads = Array.from(table.tHead.rows[0].cells).map((c) => c.textContent.trim());
const rows = Array.from(table.tBodies[0].rows).map((row) => {
  const cells = Array.from(row.cells).slice(1);
  return {problem: row.cells[0].querySelector(".problem").textContent.trim(),
          tops: cells.map((c) => Math.round(c.getBoundingClientRect().top)),
          lefts: cells.map((c) => c.getBoundingClientRect().left),
          answers: cells.map((c) => !!c.querySelector("pre, .not-run")),
          hidden: cells.map((c) => { const p = c.querySelector("pre");
                                    return !!p && p.scrollHeight > p.clientHeight + 1; }),
          rewards: cells.map((c) => {
    const r = c.querySelector(".rewards"), a = c.querySelector("pre, .not-run");
    return r ? {text: r.textContent.replace(/\\s+/g, " "),
                under: r.getBoundingClientRect().top >= a.getBoundingClientRect().bottom} : null; })};
});
return {heads: heads, rows: rows, width: table.getBoundingClientRect().width,
        room: table.parentElement.clientWidth};
"""


def test_samples_side_by_side_one_problem_per_row_one_model_per_column_rewards_under(driver, smoke_page):  # noqa: F811
    _, samples = load_report_fixture()
    load(driver, smoke_page)
    table = driver.execute_script(SIDE_BY_SIDE)
    assert table, "no side-by-side samples table"
    names = prose_names(json.loads(SMOKE_RUN.read_text(encoding="utf-8")))  # one spelling: "grpo" is GRPO in prose
    assert table["heads"] == ["problem", *(names.get(model, model) for model in samples)], table["heads"]
    first = next(iter(samples.values()))
    shown = range(1, min(SIDE_BY_SIDE_PROBLEMS, len(first)) + 1)
    assert [r["problem"] for r in table["rows"]] == [f"held-out problem {i}" for i in shown]
    for row in table["rows"]:
        assert len(set(row["tops"])) == 1, f"{row['problem']}: the models' answers are not on one row {row['tops']}"
        assert row["lefts"] == sorted(row["lefts"]), f"{row['problem']}: the models are not side by side"
        assert all(row["answers"]), row
        assert not any(row["hidden"]), f"{row['problem']}: an answer's graded last line hides in a scroll box"
        for reward in row["rewards"]:
            assert reward and reward["under"], f"{row['problem']}: an answer without its rewards under it"
            assert "correct" in reward["text"] and "format" in reward["text"] and "=" in reward["text"], reward
    assert table["width"] <= table["room"] + 1, "the side-by-side table is wider than the page's column"


LAYOUT = """
const top = (e) => e.getBoundingClientRect().top + window.scrollY;
const parts = Array.from(document.querySelectorAll("#appendix section.part > details"));
return {appendix: top(document.getElementById("appendix")), page: document.documentElement.scrollHeight,
        parts: parts.map((d) => ({id: d.parentElement.id, open: d.open,
                                  summary: d.querySelector("summary").textContent.trim()})),
        pitfalls: top(document.getElementById("pitfalls")),
        tables: Array.from(document.querySelectorAll("#pitfalls table")).map((t) => t.id)};
"""

# Every sentence of the page's prose (paragraphs, list items, captions, summaries; not model text or table cells), with
# every part of the appendix opened: what a reader who opens everything reads.
SENTENCES = """
document.querySelectorAll("details").forEach((d) => { d.open = true; });
const prose = Array.from(document.querySelectorAll("p, li, figcaption, summary, caption"))
  .filter((e) => !e.closest("pre, td, th") && !e.querySelector("p, li"));
return prose.map((e) => e.innerText.replace(/\\s+/g, " ").trim());
"""


@pytest.mark.parametrize("page_name", ["smoke", "verdicts"])
def test_the_appendix_folds_and_the_page_fits_fifteen_screens(driver, smoke_page, verdict_page,  # noqa: F811
                                                               page_name):
    """As it loads, every part of the appendix is closed to its title, numbered A.1, A.2, ... apart from the lessons;
    the whole page is then at most 15 screens, and the pitfalls, with this run's own tables, stand above the appendix.
    A part opens on a click."""
    load(driver, smoke_page if page_name == "smoke" else verdict_page)
    layout = driver.execute_script(LAYOUT)
    print(f"\n#appendix at {layout['appendix']:.0f} px, page {layout['page']} px (appendix closed)")
    assert layout["parts"] and not any(part["open"] for part in layout["parts"]), layout["parts"]
    assert [part["summary"].split(" ")[0] for part in layout["parts"]] == \
        [f"A.{i}" for i in range(1, len(layout["parts"]) + 1)]
    assert layout["page"] <= PAGE_SCREENS * SCREEN[1], f"the page is {layout['page']} px with the appendix closed"
    assert layout["appendix"] <= BODY_SCREENS * SCREEN[1]
    assert layout["pitfalls"] < layout["appendix"]
    assert {"pitfall-regex", "pitfall-group-size"} <= set(layout["tables"]), layout["tables"]
    summary = driver.find_element("css selector", "#statistics > details > summary")
    summary.click()
    assert driver.execute_script('return document.querySelector("#statistics > details").open')
    link = driver.find_element("css selector", 'a[href="#statistics"]')  # the headline's "how this is decided"
    driver.execute_script('document.querySelector("#statistics > details").open = false; arguments[0].click();', link)
    assert driver.execute_script('return document.querySelector("#statistics > details").open'), \
        "a link into the appendix lands on a closed part"


@pytest.mark.parametrize("page_name", ["smoke", "verdicts"])
def test_no_sentence_of_a_hundred_characters_is_said_twice(driver, smoke_page, verdict_page, page_name):  # noqa: F811
    import re
    from collections import Counter

    load(driver, smoke_page if page_name == "smoke" else verdict_page)
    sentences = [s for text in driver.execute_script(SENTENCES)
                 for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(])", text) if len(s) >= SENTENCE]
    twice = [s for s, n in Counter(sentences).items() if n > 1]
    assert len(sentences) > 20, "the page's prose was not found"
    assert not twice, f"said twice: {twice}"
