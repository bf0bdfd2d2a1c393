"""The first screen in headless Chromium: at 1280 x 800 and 800 x 800 CSS pixels the headline, the gains figure and
the health line lie inside the first viewport (nothing to scroll to), the figure has loaded and fits its column, and
the page does not scroll sideways. Both runs of tests/report_documents.py (the offline default and the real run's
shape); screenshots of each first screen go to results/screenshots/first-screen/ for a person to look at."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_documents import offline_document, real_document
from test_report_layout_browser import driver  # noqa: F401  (the fixture: headless Chromium, or a skip saying why)
from workflow import load_report_fixture

from thai_grpo.report.figures import draw_all
from thai_grpo.report.html import write_report

ROOT = Path(__file__).resolve().parent.parent
VIEWPORTS = ((1280, 800), (800, 800))
FIRST_SCREEN = ("headline-sentence", "gains", "health-line")

pytestmark = pytest.mark.browser

# Each first-screen element's box in the viewport (the page loaded, not scrolled), the gains image's load state and
# width against its figure's, and the page's own scroll width.
MEASURE = """
const box = (id) => { const r = document.getElementById(id).getBoundingClientRect();
                      return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
const img = document.querySelector("#gains img");
const page = document.documentElement;
return {boxes: Object.fromEntries(arguments[0].map((id) => [id, box(id)])), height: window.innerHeight,
        width: window.innerWidth, scrollY: window.scrollY, page: page.scrollWidth, room: page.clientWidth,
        image: img ? {loaded: img.complete && img.naturalWidth > 0, width: img.getBoundingClientRect().width,
                      column: img.parentElement.clientWidth} : null};
"""


@pytest.fixture(scope="module", params=["offline", "real"])
def page(request, tmp_path_factory):
    """(name, file:// URL) of the report of one run."""
    results = offline_document() if request.param == "offline" else real_document()
    out = tmp_path_factory.mktemp(f"first-screen-{request.param}")
    _, samples = load_report_fixture()
    write_report(results, samples, draw_all(results, out / "figures"), ROOT / "report", out / "report.html")
    return request.param, (out / "report.html").as_uri()


def in_viewport(driver, url: str, width: int, height: int) -> dict:  # noqa: F811
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    driver.get(url)
    layout = driver.execute_script(MEASURE, list(FIRST_SCREEN))
    assert (layout["width"], layout["height"], layout["scrollY"]) == (width, height, 0)
    return layout


def screenshot(driver, name: str, width: int, fallback: Path) -> Path:  # noqa: F811
    target = ROOT / "results" / "screenshots" / "first-screen"
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:
        target = fallback
    path = target / f"{name}-{width}.png"
    driver.save_screenshot(str(path))
    return path


@pytest.mark.parametrize("width, height", VIEWPORTS)
def test_headline_gains_and_health_are_on_the_first_screen(driver, page, width, height, tmp_path):  # noqa: F811
    name, url = page
    layout = in_viewport(driver, url, width, height)
    shot = screenshot(driver, name, width, tmp_path)
    print(f"\n{name} at {width} x {height}: {layout['boxes']} ({shot})")
    for element in FIRST_SCREEN:
        b = layout["boxes"][element]
        assert 0 <= b["top"] and b["bottom"] <= height, f"{name} at {width} px: #{element} is at {b}, below the fold"
        assert 0 <= b["left"] and b["right"] <= width, f"{name} at {width} px: #{element} is at {b}, off the side"
    image = layout["image"]
    assert image and image["loaded"], f"{name} at {width} px: the gains figure did not load"
    assert image["width"] <= image["column"] + 1, f"{name} at {width} px: the gains figure is wider than its column"
    assert layout["page"] <= layout["room"], \
        f"{name} at {width} px: the page scrolls sideways ({layout['page']} px of content in {layout['room']} px)"
