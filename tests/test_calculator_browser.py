"""The report's advantage calculator in a real browser (headless Chromium, no network), and proof that
model text shown in the samples cannot run script."""

from __future__ import annotations

from pathlib import Path

import pytest
from workflow import load_report_fixture

from thai_grpo.report.figures import draw_all
from thai_grpo.report.html import write_report

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--no-first-run", "--window-size=1100,1400")
WORKED_EXAMPLE = ["+1.56", "-0.55", "-0.20", "+1.56", "-0.55", "-1.08", "-0.55", "-0.20"]

pytestmark = pytest.mark.browser

# Draws text with an element's font on a canvas; the pixels tell a glyph from the missing-glyph box, which is the
# same box for every character a font stack lacks (U+0E7F, in the Thai block, is assigned to no character at all).
GLYPH_PIXELS = """
const [element, text] = arguments;
const canvas = document.createElement("canvas");
canvas.width = 64; canvas.height = 64;
const context = canvas.getContext("2d");
context.font = getComputedStyle(element).font;
context.textBaseline = "top";
context.fillText(text, 4, 4);
return Array.from(context.getImageData(0, 0, 64, 64).data).join(",");
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The fixture's report, rendered to a temporary directory; its file:// URL."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("headless Chromium not installed: apt-get install chromium chromium-driver "
                    "(make test installs them)")
    out = tmp_path_factory.mktemp("report")
    results, samples = load_report_fixture()
    write_report(results, samples, draw_all(results, out / "figures"), ROOT / "report", out / "report.html")
    return (out / "report.html").as_uri()


@pytest.fixture(scope="module")
def driver(page, tmp_path_factory):
    """Headless Chromium with a fresh profile and the browser console log enabled."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    browser.get(page)
    yield browser
    browser.quit()


def advantages(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return [cell.text for cell in driver.find_elements(By.CSS_SELECTOR, "#calc-output td.adv")]


def type_rewards(driver, text: str) -> None:
    """Replace the rewards field's content by typing, as a reader would (fires input events)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    field = driver.find_element(By.ID, "calc-rewards")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.DELETE)
    field.send_keys(text)


def set_divide_by_std(driver, wanted: bool) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "calc-divide-std")
    if box.is_selected() != wanted:
        box.click()


def message(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, "calc-message").text


def test_prefilled_worked_example(driver, page):
    driver.get(page)
    assert advantages(driver) == WORKED_EXAMPLE
    assert message(driver) == ""


def test_typed_rewards_grpo_then_dr_grpo(driver):
    set_divide_by_std(driver, True)
    type_rewards(driver, "1, 0, 0, 0")
    assert advantages(driver) == ["+1.50", "-0.50", "-0.50", "-0.50"]  # std (ddof=1) = 0.5
    set_divide_by_std(driver, False)
    assert advantages(driver) == ["+0.75", "-0.25", "-0.25", "-0.25"]  # Dr.GRPO: r - mean only
    type_rewards(driver, "1.5 0.3 0.5 1.5 0.3 0.0 0.3 0.5")
    set_divide_by_std(driver, True)
    assert advantages(driver) == WORKED_EXAMPLE


def test_a_tie_rounds_as_the_reports_tables_do(driver):
    """Dr.GRPO on seven right and one wrong: r - mean is +-0.125 and -0.875 exactly, which Python's format (the tables)
    rounds to the even digit; the calculator shows the same."""
    from thai_grpo.report.html import signed

    set_divide_by_std(driver, False)
    type_rewards(driver, "1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 0.5")
    assert advantages(driver) == [signed(0.125)] * 7 + [signed(-0.875)] == ["+0.12"] * 7 + ["-0.88"]
    type_rewards(driver, "0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 1.5")
    assert advantages(driver) == ["-0.12"] * 7 + ["+0.88"]
    set_divide_by_std(driver, True)


def test_all_equal_group_teaches_nothing(driver, tmp_path):
    type_rewards(driver, "0.5, 0.5, 0.5, 0.5")
    assert advantages(driver) == ["0.00"] * 4
    assert message(driver) == "all rewards equal: this group teaches nothing"
    screenshot(driver, fallback=tmp_path)
    type_rewards(driver, "1, 0")
    assert message(driver) == ""


def test_bad_input_shows_a_message(driver):
    type_rewards(driver, "1, abc")
    assert advantages(driver) == []
    assert "not a number" in message(driver)


def test_model_text_cannot_run_script(driver):
    from selenium.webdriver.common.by import By

    assert driver.execute_script("return typeof window.__pwned") == "undefined"
    samples = driver.find_element(By.ID, "samples").text
    assert "<script>window.__pwned=1</script>" in samples
    assert '<img src=x onerror="window.__pwned=1">' in samples


def test_no_javascript_errors(driver):
    try:
        log = driver.get_log("browser")
    except Exception:  # not every driver exposes the console log
        pytest.skip("browser log not available")
    errors = [entry for entry in log if entry.get("level") == "SEVERE"]
    assert errors == []


def screenshot(driver, fallback: Path, element_id: str = "calculator", name: str = "calculator.png") -> Path:
    """Save one section (default: the calculator, showing the all-equal message) to results/screenshots/ and
    print the path."""
    from selenium.webdriver.common.by import By

    target = ROOT / "results" / "screenshots"
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:
        target = fallback
    path = target / name
    section = driver.find_element(By.ID, element_id)
    driver.execute_script("arguments[0].scrollIntoView();", section)
    section.screenshot(str(path))
    print(f"{element_id} screenshot: {path}")
    return path


def test_thai_questions_render_as_thai_glyphs(driver, page, tmp_path):
    """The samples' Thai questions are drawn with Thai glyphs, not missing-glyph boxes (report/style.css names the
    common Thai fonts; make test installs fonts-thai-tlwg)."""
    from selenium.webdriver.common.by import By

    driver.get(page)
    samples = driver.find_element(By.ID, "samples")
    assert "สมชาย" in samples.text  # a Thai question of the fixture is on the page
    question = samples.find_element(By.XPATH, ".//*[contains(text(), 'สมชาย')]")
    for element in (samples, question):  # the page's font stack, and the one questions are set in
        ko, kho, unassigned = (driver.execute_script(GLYPH_PIXELS, element, text) for text in ("ก", "ข", "\u0e7f"))
        assert len(set(ko.split(","))) > 1, "nothing was drawn"
        assert ko != unassigned and ko != kho, \
            "Thai shows as boxes: no Thai font installed; apt-get install fonts-thai-tlwg (make test installs it)"
    screenshot(driver, fallback=tmp_path, element_id="samples", name="samples.png")
