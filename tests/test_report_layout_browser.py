"""The report reads at any width: rendered in headless Chromium at 1280 and 800 CSS pixels, no table is wider than the
box it sits in and the page itself does not scroll sideways. A table that needs a horizontal scrollbar hides the columns
a reader came for. The results are a real run's: tests/fixtures/results_smoke_run.json is results/results.json of
`snakemake --cores 2 --configfile config/smoke.yaml` (every method and table of the default run, at toy sizes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_calculator_browser import CHROMEDRIVER, CHROMIUM, CHROMIUM_FLAGS
from workflow import load_report_fixture

from thai_grpo.report.figures import draw_all
from thai_grpo.report.html import write_report

ROOT = Path(__file__).resolve().parent.parent
SMOKE_RUN = ROOT / "tests" / "fixtures" / "results_smoke_run.json"
WIDTHS = (1280, 800)
MAX_LINES = 10

pytestmark = pytest.mark.browser

# Per table: its width against the content width of the element that holds it (a scrolling wrapper counts as the
# container: a table that only fits by scrolling does not fit), and its tallest body row in lines of text. Plus the
# page's own scroll width.
MEASURE = """
const tables = Array.from(document.querySelectorAll("table")).map((table) => {
  const box = table.parentElement, style = getComputedStyle(box);
  const room = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const section = table.closest("section");
  const line = parseFloat(getComputedStyle(table).fontSize) * 1.55;  // body line-height (report/style.css)
  const lines = Math.max(0, ...Array.from(table.tBodies).flatMap((body) => Array.from(body.rows))
                                .map((row) => row.getBoundingClientRect().height / line));
  return {section: section ? section.id : "", cls: table.className, width: table.getBoundingClientRect().width,
          room: room, lines: lines};
});
const page = document.documentElement;
return {tables: tables, page: page.scrollWidth, room: page.clientWidth, viewport: window.innerWidth};
"""


def with_optional_parts(results: dict) -> dict:
    """The run plus every part a default run leaves out (pitfall variants, a second held-out set, pass@k to
    k = 64, the seed study, the reward-hacking runs), each as the other report tests build it."""
    import numpy as np
    from test_hacking import hand_results
    from test_report import with_extra_set, with_pitfalls
    from test_seeds import _fixture_study

    from thai_grpo_studies.large_k import large_k_results
    from thai_grpo_studies.study_words import large_k_verdict

    results = with_extra_set(with_pitfalls(results))
    rng = np.random.default_rng(0)
    results["passk"] = {**large_k_results({m: {"n_samples": 64, "per_problem_correct": rng.integers(0, 65, 30).tolist()}
                                           for m in ("base", "sft", "grpo")}, n_boot=200),
                        "problems_chosen": "the first 30 of results/data/heldout.jsonl"}
    results["passk"]["verdict"] = large_k_verdict(results["passk"])
    results["seed_study"] = _fixture_study()
    results["hacking"] = hand_results()
    return results


@pytest.fixture(scope="module", params=["run", "optional"])
def page(request, tmp_path_factory):
    """The run's report (and once more with every optional part), rendered as the pipeline renders it: (its name, its
    file:// URL)."""
    out = tmp_path_factory.mktemp(f"report-layout-{request.param}")
    results = json.loads(SMOKE_RUN.read_text(encoding="utf-8"))
    if request.param == "optional":
        results = with_optional_parts(results)
    _, samples = load_report_fixture()
    write_report(results, samples, draw_all(results, out / "figures"), ROOT / "report", out / "report.html")
    return request.param, (out / "report.html").as_uri()


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("headless Chromium not installed: apt-get install chromium chromium-driver "
                    "(make test installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    browser = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield browser
    browser.quit()


def at_width(driver, page: str, width: int) -> dict:
    """The page laid out with a viewport exactly ``width`` CSS pixels wide; the measurements of MEASURE."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 2400, "deviceScaleFactor": 1, "mobile": False})
    driver.get(page)
    layout = driver.execute_script(MEASURE)
    assert layout["viewport"] == width
    return layout


def screenshots(driver, width: int, target: Path, fallback: Path,
                sections=("headline", "comparison", "heldout", "pitfalls")) -> None:
    """Sections as a reader sees them at this width, for a person to look at (results/screenshots/, else fallback)."""
    from selenium.webdriver.common.by import By

    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:
        target = fallback
    for section in sections:
        element = driver.find_element(By.ID, section)
        driver.execute_script("arguments[0].scrollIntoView();", element)
        element.screenshot(str(target / f"report-{section}-{width}.png"))


@pytest.mark.parametrize("width", WIDTHS)
def test_no_table_is_wider_than_its_container(driver, page, width, tmp_path):
    name, url = page
    layout = at_width(driver, url, width)
    report = [f"{t['section']}/{t['cls'] or 'table'}: {t['width']:.0f} px in {t['room']:.0f} px, tallest row "
              f"{t['lines']:.1f} lines" for t in layout["tables"]]
    print(f"\n{name} at {width} px (page {layout['page']} px):\n  " + "\n  ".join(report))
    screenshots(driver, width, ROOT / "results" / "screenshots" / name, tmp_path)
    too_wide = [line for t, line in zip(layout["tables"], report) if t["width"] > t["room"] + 1]
    assert not too_wide, f"at {width} px these tables are wider than their container: {too_wide}"
    # a method's row of the comparison reads as a few lines, not a column of single words
    too_tall = [line for t, line in zip(layout["tables"], report) if "methods" in t["cls"] and t["lines"] > MAX_LINES]
    assert not too_tall, f"at {width} px a method's row is taller than {MAX_LINES} lines: {too_tall}"
    assert layout["page"] <= layout["room"], \
        f"at {width} px the page scrolls sideways: {layout['page']} px of content in {layout['room']} px"
