"""The HTML report renders every section from a small results.json, escapes model text, makes no network
request, degrades to "not run", and writes atomically; plus the pure run-health and transition functions, and
the Pitfalls section from the pitfall variants' runs (tests/fixtures/pitfall_runs.json)."""

from __future__ import annotations

import copy
import json
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from workflow import load_report_fixture

from thai_grpo.evaluation.scoring import pairwise_tests
from thai_grpo.report.plan_words import fmt_p

from thai_grpo.analyses.health import hacking_suspect, truncation_failed
from thai_grpo.report.figures import draw_all, solve_rate_transitions
from thai_grpo.report.glance import prose_names
from thai_grpo_studies.pitfall_figures import draw_pitfalls
from thai_grpo.report.html import APPENDIX, SECTIONS, render_report, write_report
from thai_grpo.report.lessons import SIDE_BY_SIDE_PROBLEMS

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
TEMPLATE_DIR = ROOT / "report"
PAYLOAD = "<script>alert(1)</script><img src=x onerror=alert(1)>"





class TagCollector(HTMLParser):
    """Every start tag with its attributes, as the browser's tokenizer would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict]]:
    parser = TagCollector()
    parser.feed(html)
    return parser.tags


def csp_of(html: str) -> str:
    """The Content-Security-Policy the page declares in its <meta> tag."""
    metas = [a for t, a in tags_of(html) if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert len(metas) == 1
    return metas[0]["content"]


@pytest.fixture(scope="module")
def fixture_data():
    return load_report_fixture()


@pytest.fixture(scope="module")
def figures(fixture_data, tmp_path_factory):
    return draw_all(fixture_data[0], tmp_path_factory.mktemp("figures"))


@pytest.fixture(scope="module")
def html(fixture_data, figures):
    results, samples = copy.deepcopy(fixture_data)
    samples["grpo"][1]["completions"].insert(0, {"text": PAYLOAD, "correct": 1.0, "format": 0.0, "thai": 0.0,
                                                 "total": 1.0, "num_tokens": 20, "truncated": False})
    results["train"]["example_groups"]["mixed"]["completions"][0] = PAYLOAD
    results["comparison"]["pairwise"] = pairwise_tests(results["eval"], list(results["eval"]), ("pass@1",), 1000)
    return render_report(results, samples, figures, TEMPLATE_DIR)


def test_figures_drawn_for_every_part_of_the_fixture(figures):
    expected = {"training_curves", "group_advantages", "grpo_vs_ppo", "k1_vs_k3_synthetic", "k1_vs_k3_real",
                "pass_at_k", "pass_at_k_gap", "solve_rate_scatter"}
    assert set(figures) == expected
    for path in figures.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_section_heading_is_present_lessons_first_then_the_appendix(html):
    """The lessons and the pitfalls in the chapter's order, numbered 1-9; then the appendix, numbered A.1-A.8 apart from
    them, each part a <details> closed as the page loads (its summary the part's title)."""
    assert [section_id for section_id, _ in SECTIONS] == ["advantages", "groups", "training", "grpo-vs-ppo", "kl",
                                                          "polish", "methods", "samples", "pitfalls"]
    for section_id, title in SECTIONS:
        assert f'<section id="{section_id}"' in html
        assert f"<h2>{title}</h2>" in html
    for number, (section_id, title) in enumerate(APPENDIX, 1):
        assert title.startswith(f"A.{number} ")
        part = html.split(f'<section id="{section_id}" class="part')[1].split("</section>")[0]
        assert f"<details><summary><h2>{title}</h2></summary>" in part  # closed: no "open" attribute
    appendix = html.index('<div id="appendix"')
    assert all(html.index(f'<section id="{section_id}"') < appendix for section_id, _ in SECTIONS)
    assert all(html.index(f'<section id="{section_id}"') > appendix for section_id, _ in APPENDIX)
    assert html.count('href="#glance"') >= 2  # back to the top, at the appendix's head and its end
    for words in ("Run card", "Training curves", "Figure 5.1", "calculator", "Figure 5.2", "Figure 5.3",
                  "Held-out results", "Comparison across methods", "Pitfalls", "Statistics note", "Samples"):
        assert words in html


def test_numbers_from_the_fixture_appear_formatted(html):
    for text in (
        "47.9%", "[38.2, 57.8]", "[27.1, 68.8]",  # grpo pass@1: estimate, Wilson, bootstrap
        "32.3%", "75.0%",  # sft pass@1, pass@8
        "3,400,000", "180,224",  # base and trainable parameters
        "81,389", "262,144", "31.0%",  # generated tokens vs the seed's full-run estimate
        "4 min 0.5 s", "7 min 35.9 s",  # grpo stage, total wall time
        "GRPO raised held-out pass@1 over SFT by 15.6 points",  # the headline's verdict, from the note's test
        "frozen copy of the SFT adapter", "trl 0.24.0", "eval = 1234",
        "+1.56", "-1.08",  # the mixed group's advantages
    ):
        assert text in html, text
    assert re.search(r"moved up</th><td[^>]*>9<", html)
    assert re.search(r"unsolved in both</th><td[^>]*>2<", html)


def test_every_pair_of_models_is_tested_under_the_plan_which_comes_first(html, fixture_data):
    results = fixture_data[0]
    models = list(results["eval"])
    note = html.split('<section id="statistics" class="part">')[1].split("</section>")[0]
    assert note.split("</summary>")[1].lstrip().startswith('<p class="plan">Analysis plan, declared in the config')
    names = prose_names(results)  # one spelling: the comparison's names ("grpo" is GRPO)
    for i, b in enumerate(models):
        for a in models[i + 1:]:
            assert f"<th>{names[a]} - {names[b]}</th>" in html
    tests = pairwise_tests(results["eval"], models, ("pass@1",), 1000)
    note = html.split('<section id="statistics" class="part">')[1].split("</section>")[0]
    assert note.count(' supported"') == sum(t["supported"] for t in tests) > 0


def test_headline_comes_before_the_run_card_and_leads_with_problem_intervals(html):
    assert html.index("What happened") < html.index('id="run-card"')
    headline = html[html.index("What happened"):html.index('id="run-card"')]
    assert headline.index("over problems") < headline.index("Wilson")


def test_page_makes_no_external_requests(html):
    assert "http://" not in html and "https://" not in html
    for tag, attrs in tags_of(html):
        for name in ("src", "href", "action", "poster", "srcset"):
            value = (attrs.get(name) or "").strip()
            assert not re.match(r"(https?:)?//", value), (tag, name, value)
        if "src" in attrs:
            assert attrs["src"].startswith("data:image/png;base64,"), tag
        if tag == "a":
            assert attrs["href"].startswith("#")
        assert tag != "link", "stylesheets must be inlined"
    assert "@import" not in html and "url(" not in html
    assert "default-src 'none'" in csp_of(html)


def test_model_text_is_escaped(html):
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<script>alert" not in html
    assert not re.search(r"<[^<>]*\sonerror\s*=", html)
    tags = tags_of(html)
    assert [t for t, _ in tags].count("script") == 1, "only the calculator script"
    assert [t for t, _ in tags].count("img") == 8, "only the eight figures"
    assert not any(name.startswith("on") for _, attrs in tags for name in attrs)


def test_calculator_is_inlined_and_prefilled(html):
    assert 'id="calc-rewards"' in html and 'id="calc-divide-std"' in html
    assert 'id="calc-output"' in html and 'id="calc-message"' in html
    assert 'value="1.5, 0.3, 0.5, 1.5, 0.3, 0.0, 0.3, 0.5"' in html
    assert "var EPS = 1e-4;" in html
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]+'", csp_of(html))


def test_missing_optional_parts_render_not_run(fixture_data, figures):
    results, samples = copy.deepcopy(fixture_data)
    del results["kl_real"]
    for method in results["comparison"]["methods"]:
        method["run"] = False
    figures = {k: v for k, v in figures.items() if k != "k1_vs_k3_real"}
    html = render_report(results, samples, figures, TEMPLATE_DIR)
    assert "real per-token log-probs (kl_real): not run" in html
    # one cell across each results row, in the lesson's table and in the appendix's full one
    assert html.count("not run yet") == 2 * len(results["comparison"]["methods"])


def test_a_nearly_empty_results_file_still_renders(tmp_path):
    figures = draw_all({}, tmp_path)
    html = render_report({}, {}, figures, TEMPLATE_DIR)
    for text in ("benchmarks: not run", "generated tokens: not run", "Training curves: not run",
                 "held-out evaluation: not run", "method comparison: not run", "paired tests: not run",
                 "samples: not run", "real per-token log-probs (kl_real): not run"):
        assert text in html, text
    assert set(figures) == {"grpo_vs_ppo", "k1_vs_k3_synthetic"}


def test_health_flags_shown(fixture_data, figures):
    results, samples = copy.deepcopy(fixture_data)
    results["train"]["health"] = {"truncation_failed": True, "hacking_suspect": False,
                                  "messages": ["95% of completions hit max_completion_length"]}
    html = render_report(results, samples, figures, TEMPLATE_DIR)
    assert "truncation: FLAGGED" in html and "reward hacking: ok" in html
    assert "95% of completions hit max_completion_length" in html


def test_write_report_is_atomic(fixture_data, figures, tmp_path):
    results, samples = fixture_data
    out = write_report(results, samples, figures, TEMPLATE_DIR, tmp_path / "report.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert out.stat().st_mode & 0o044 == 0o044, "report readable by others"
    with pytest.raises(Exception):
        write_report(results, samples, figures, tmp_path / "no-such-template-dir", tmp_path / "broken.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_figures_can_be_given_as_their_directory(fixture_data, figures):
    results, samples = fixture_data
    from_dict = render_report(results, samples, figures, TEMPLATE_DIR)
    from_dir = render_report(results, samples, next(iter(figures.values())).parent, TEMPLATE_DIR)
    assert from_dict == from_dir


def test_figures_are_deterministic(fixture_data, tmp_path):
    results = fixture_data[0]
    first = draw_all(results, tmp_path / "a")
    second = draw_all(results, tmp_path / "b")
    for name in first:
        assert first[name].read_bytes() == second[name].read_bytes(), name


# --------------------------------------------------------------------------- pure functions
def test_solve_rate_transitions_counts():
    before = [0, 0, 3, 5, 8, 2, 1]
    after = [0, 4, 3, 2, 8, 6, 0]
    assert solve_rate_transitions(before, after) == {"moved_up": 2, "newly_solved": 1, "got_worse": 2, "lost": 1,
                                                     "no_signal_ever": 1, "unchanged": 2, "total": 7}


def test_solve_rate_transitions_rejects_mismatched_problems():
    with pytest.raises(ValueError):
        solve_rate_transitions([1, 2], [1, 2, 3])


def steps_with(lengths, accuracies=None, clipped=None) -> list[dict]:
    n = len(lengths)
    accuracies = accuracies or [0.3] * n
    clipped = clipped or [0.0] * n
    return [{"step": i + 1, "completion_length_mean": lengths[i], "accuracy": accuracies[i],
             "clipped_ratio": clipped[i]} for i in range(n)]


def test_hacking_suspect_when_length_rises_and_accuracy_is_flat():
    assert hacking_suspect(steps_with([100, 100, 110, 130, 150, 160], [0.30, 0.31, 0.30, 0.30, 0.31, 0.30]))


def test_no_hacking_suspect_when_accuracy_rises_with_length():
    assert not hacking_suspect(steps_with([100, 100, 110, 130, 150, 160], [0.30, 0.32, 0.36, 0.40, 0.42, 0.45]))


def test_no_hacking_suspect_when_length_is_flat_or_run_is_short():
    assert not hacking_suspect(steps_with([100, 101, 99, 102, 110, 115]))  # +12%: below the 20% bar
    assert not hacking_suspect(steps_with([100, 200]))
    assert not hacking_suspect([])


def test_truncation_failed_uses_the_last_third():
    assert truncation_failed(steps_with([256] * 6, clipped=[0.2, 0.5, 0.7, 0.9, 0.95, 0.97]))
    assert not truncation_failed(steps_with([256] * 6, clipped=[1.0, 1.0, 1.0, 0.6, 0.5, 0.4]))
    assert not truncation_failed(steps_with([256] * 6, clipped=[0.9] * 4 + [0.85, 0.9]))
    assert truncation_failed(steps_with([256] * 3, clipped=[0.0, 0.0, 0.9]))
    assert not truncation_failed([])


def test_whitespace_only_completion_is_labelled(fixture_data, figures):
    results, samples = copy.deepcopy(fixture_data)
    samples["sft"][0]["greedy"]["text"] = "\n\n\n"
    html = render_report(results, samples, figures, TEMPLATE_DIR)
    assert "(empty or whitespace only: 3 characters)" in html


# --------------------------------------------------------------------------- methods and pitfalls
def with_pitfalls(results: dict) -> dict:
    """The small fixture plus the pitfall variants' runs, their held-out pass@1 and the run-health the
    pipeline computes for each (health.training_health)."""
    from thai_grpo.analyses.health import training_health

    extra = json.loads((FIXTURES / "pitfall_runs.json").read_text(encoding="utf-8"))
    results = copy.deepcopy(results)
    results["runs"] = extra["runs"]
    for run in results["runs"].values():
        run["health"] = training_health(run["steps"])
    results["pitfalls"] = extra["pitfalls"]
    for name, estimate in extra["pass1"].items():
        results["eval"][name] = {**copy.deepcopy(results["eval"]["grpo"]),
                                 "pass@1": {"estimate": estimate, "wilson_low": estimate - 0.1,
                                            "wilson_high": estimate + 0.1}}
    return results


@pytest.fixture(scope="module")
def pitfall_report(fixture_data, tmp_path_factory):
    results, samples = copy.deepcopy(fixture_data)
    results = with_pitfalls(results)
    results["runs"]["lenient_format"]["empty_think_examples"].append(
        {"step": 4, "prompt": "p", "reward": 0.5, "completion": "<think></think>" + PAYLOAD})
    out = tmp_path_factory.mktemp("pitfall-figures")
    figures = {**draw_all(results, out), **draw_pitfalls(results, out)}  # as scripts/make_pitfall_figures.py does
    return figures, render_report(results, samples, figures, TEMPLATE_DIR)


def test_one_figure_per_pitfall(pitfall_report):
    figures, html = pitfall_report
    assert {"pitfall_group_size", "pitfall_temperature", "pitfall_reward_hacking"} <= set(figures)
    for title in ("Group size G", "Sampling temperature", "Reward hacking: the lenient format regex"):
        assert f"<h3>{title}</h3>" in html and f'alt="{title}"' in html, title
    section = html.split('<section id="experiments" class="part">')[1].split("</section>")[0]
    assert "40.1%" in section and "35.0%" in section and "31.0%" in section  # held-out pass@1 of g2, temp0.3, lenient
    assert "0.75 &rarr; 0.69" in section  # grpo: groups with std > 0, first vs last third of the steps
    assert "pitfall variants: not run" not in html


def test_lenient_run_is_flagged_and_its_hacking_completions_escaped(pitfall_report):
    _, html = pitfall_report
    section = html.split('<section id="experiments" class="part">')[1].split("</section>")[0]
    assert "The hacking detector flagged <strong>lenient_format</strong>" in section
    assert "reward-hacking suspect: FLAGGED" in section and "lenient format regex is being reward-hacked" in section
    assert "&lt;think&gt;&lt;/think&gt;\n&lt;b&gt;30&lt;/b&gt;" in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section and "<script>alert" not in html
    assert [t for t, _ in tags_of(html)].count("script") == 1


def test_a_run_that_did_not_hack_is_reported_honestly(fixture_data, figures):
    from thai_grpo.analyses.health import training_health

    results, samples = copy.deepcopy(fixture_data)
    results = with_pitfalls(results)
    lenient = results["runs"]["lenient_format"]
    for step in lenient["steps"]:
        step["empty_think_share"] = step["hollow_think_paid_share"] = 0.0
    lenient["empty_think_examples"] = []
    lenient["health"] = training_health(lenient["steps"])
    html = render_report(results, samples, figures, TEMPLATE_DIR)
    assert "The detector did not flag <strong>lenient_format</strong>" in html
    assert "did not find the" in html and "no completion with an empty think block" in html


def test_without_pitfall_runs_the_section_says_how_to_build_them(html):
    assert "pitfall variants: not run (build them with <code>snakemake --cores 2 pitfalls</code>)" in html


def test_comparison_shows_results_and_costs_in_two_tables_with_the_notes_tests(fixture_data, figures, html):
    """The lesson (#methods, in the body) holds the results and the costs; the notes on them are in the appendix's
    full comparison."""
    results, samples = copy.deepcopy(fixture_data)
    results["preference_pairs"] = {"problems": 128, "samples_per_problem": 8, "pairs": 41, "all_right": 12,
                                   "all_wrong": 75}
    page = render_report(results, samples, figures, TEMPLATE_DIR)
    comparison = page.split('<section id="comparison" class="part">')[1].split("</section>")[0]
    assert "DPO can only rank answers that exist in the file" in comparison
    assert "41 had both a correct and a wrong answer" in comparison and "75 were never" in comparison
    lesson = page.split('<section id="methods">')[1].split("</section>")[0]
    results_table = lesson.split('class="numbers methods results"')[1].split("</table>")[0]
    costs_table = lesson.split('class="numbers methods costs"')[1].split("</table>")[0]
    assert "pass@1 vs SFT" in results_table and "human labels" not in results_table
    assert "human labels" in costs_table and "trainable parameters" in costs_table and "pass@1" not in costs_table
    for method in results["comparison"]["methods"]:  # one row per method in each; one not run is said so once
        row = f"<th>{method['method']}</th>"
        assert results_table.count(row) == 1 and costs_table.count(row) == (1 if method.get("run") else 0)
    assert "n/a" in results_table.split("<th>GRPO</th>")[1].split("</tr>")[0]  # no comparison.pairwise in the fixture
    with_tests = html.split('<section id="methods">')[1].split("</section>")[0]
    grpo = with_tests.split('class="numbers methods results"')[1].split("<th>GRPO</th>")[1].split("</tr>")[0]
    note = pairwise_row(html, "GRPO - SFT")
    grpo = unescape(grpo)
    assert f"{note['difference']} points" in grpo and note["interval"] in grpo and f">{note['verdict']}</span>" in grpo
    assert "adjusted p" not in grpo and "Wilson" not in grpo  # plain words in the lesson, the statistics after it
    full = html.split('<section id="comparison" class="part">')[1].split('class="numbers methods results full"')[1]
    full_grpo = unescape(full.split("<th>GRPO</th>")[1].split("</tr>")[0])
    assert f"{note['difference']} points" in full_grpo and f"adjusted p {note['holm']}" in full_grpo
    assert "Wilson" in full_grpo


# --------------------------------------------------------------------------- the headline agrees with the note
def pairwise_row(html: str, pair: str, metric: str = "pass@1") -> dict:
    """A row of the statistics note's pairwise table for ``metric``: its cells by column name."""
    note = html.split('<section id="statistics" class="part">')[1].split("</section>")[0]
    heading = "held-out pass@1 (per-problem solve rate)" if metric == "pass@1" else "greedy accuracy"
    table = note.split(f"<h3>Pairwise: {heading}</h3>")[1].split("</table>")[0]
    row = table.split(f"<th>{pair}</th>")[1].split("</tr>")[0]
    cells = [unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    return dict(zip(["difference", "interval", "p", "holm", "family", "verdict"], cells))


def headline_line(html: str, name: str) -> str:
    box = html[html.index('id="headline"'):html.index('id="run-card"')]
    return re.sub(r"\s+", " ", box.split(f"<li><strong>{name}</strong>")[1].split("</li>")[0])


def with_pairwise(results: dict, greedy: dict) -> dict:
    """The fixture with the statistics note's tests: pass@1 computed, greedy accuracy's grpo - sft as given."""
    results = copy.deepcopy(results)
    models = list(results["eval"])
    tests = pairwise_tests(results["eval"], models, ("pass@1",), 1000)
    others = [{"a": a, "b": b, "metric": "greedy", "mean_diff": 0.01, "ci_low": -0.1, "ci_high": 0.12,
               "p_value": 0.8, "n_resamples": 1000, "p_holm": 0.9, "supported": False, "verdict": "not_resolved",
               "family": "secondary", "alpha": 0.05, "correction": "Holm over the 3 pairs"}
              for a, b in (("sft", "base"), ("grpo", "base"))]
    results["comparison"]["pairwise"] = tests + others + [{"a": "grpo", "b": "sft", "metric": "greedy",
                                                           "n_resamples": 1000, "family": "secondary", "alpha": 0.05,
                                                           "correction": "Holm over the 3 pairs", **greedy}]
    return results


@pytest.mark.parametrize("greedy", [
    # the interval over problems excludes 0 but Holm over the family does not: "not resolved", as the note
    {"mean_diff": -0.095, "ci_low": -0.167, "ci_high": -0.024, "p_value": 0.0095, "p_holm": 0.104, "supported": False,
     "verdict": "not_resolved"},
    {"mean_diff": -0.095, "ci_low": -0.167, "ci_high": -0.024, "p_value": 0.001, "p_holm": 0.003, "supported": True,
     "verdict": "lower"},
    {"mean_diff": 0.083, "ci_low": 0.01, "ci_high": 0.16, "p_value": 0.004, "p_holm": 0.012, "supported": True,
     "verdict": "higher"},
])
def test_every_headline_verdict_is_the_notes_verdict_for_the_same_pair(fixture_data, figures, greedy):
    results, samples = fixture_data
    html = render_report(with_pairwise(results, greedy), samples, figures, TEMPLATE_DIR)
    box = html[html.index('id="headline"'):html.index('id="run-card"')]
    assert "Analysis plan, declared in the config" in box and "secondary (greedy accuracy)" in box
    for name, model in (("Base (no adapter)", "base"), ("GRPO", "grpo")):
        sentences = re.findall(r'<span class="versus">(.*?)</span>', headline_line(html, name))
        for sentence, metric in zip(sentences, ("pass@1", "greedy"), strict=True):
            word = pairwise_row(html, "SFT - base" if model == "base" else f"{name} - SFT", metric)["verdict"]
            if model == "base":  # the note's row reads sft - base, the headline base - sft
                word = {"higher": "lower", "lower": "higher"}.get(word, word)
            phrase = unescape(sentence).rsplit("): ", 1)[1]
            said = next(w for w in ("higher", "lower", "not resolved", "not tested", "equivalent")
                        if f" {w} than " in phrase or phrase.startswith(w) or f" {w} (" in phrase)
            assert said == word, (name, metric, sentence)
    grpo = headline_line(html, "GRPO")
    size = f"{abs(100 * greedy['mean_diff']):.1f} points"
    assert size in grpo and f"+{size}" not in grpo and f"-{size}" not in grpo
    assert ("below SFT" if greedy["mean_diff"] < 0 else "over SFT" if greedy["supported"] else "above SFT") in grpo
    assert f"adjusted p = {fmt_p(greedy['p_holm'])}" in grpo


def test_headline_has_one_line_per_evaluated_method(html, fixture_data):
    results = fixture_data[0]
    box = html[html.index('id="headline"'):html.index('id="run-card"')]
    shown = re.findall(r"<li><strong>([^<]+)</strong>", box)
    assert shown == [m["method"] for m in results["comparison"]["methods"] if m["run"]]
    assert "The reference every other line is compared with." in headline_line(html, "SFT")


# --------------------------------------------------------------------------- second held-out set (MGSM Thai)
def with_extra_set(results: dict, title: str = "MGSM Thai") -> dict:
    """The fixture plus a second held-out set whose scores are the fixture's main ones, pass@1 raised a little."""
    results = copy.deepcopy(results)
    evals = copy.deepcopy(results["eval"])
    evals["grpo"]["pass@1"] = {"estimate": 0.3125, "wilson_low": 0.2, "wilson_high": 0.45, "bootstrap_low": 0.15,
                               "bootstrap_high": 0.5}
    results["extra_sets"] = {"mgsm_th": {
        "title": title, "source": {"source": "hub", "path": "juletxara/mgsm", "name": "th", "split": "test",
                                   "revision": "main"},
        "data": {"source_rows": 250, "duplicates_removed": 0, "seen_in_training_dropped": 2, "problems": 248},
        "eval": evals, "paired_tests": {"grpo_vs_sft": {"mean_diff": -0.021, "ci_low": -0.05, "ci_high": 0.01,
                                                        "p_value": 0.21}}}}
    return results


def heldout_section(html: str) -> str:
    return html.split('<section id="heldout" class="part">')[1].split("</section>")[0]


def test_second_heldout_set_table_renders_apart_from_the_main_one(fixture_data, figures, html):
    results, samples = copy.deepcopy(fixture_data)
    section = heldout_section(render_report(with_extra_set(results), samples, figures, TEMPLATE_DIR))
    main, extra = section.split("<h3>Second held-out set: MGSM Thai</h3>")
    assert main == heldout_section(html).split('<p class="not-run">second held-out set: not configured')[0]
    assert "248 problems from <code>juletxara/mgsm</code>, configuration th" in extra and "revision main" in extra
    assert "dropped: 2;" in extra and "pass@1 vs SFT (paired)" in extra
    rows = re.findall(r"<tr><th>(\w+)</th><td>", extra)
    assert rows == ["base", "SFT", "GRPO"]
    assert '<span class="estimate">31.2%</span>' in extra and "Wilson [20.0, 45.0]" in extra
    assert "-2.1 points <span class=\"ci\">[-5.0, 1.0], p 0.21</span>" in extra
    assert "12 x 8" in extra


def test_second_heldout_set_absent_says_not_configured(html):
    assert "second held-out set: not configured (eval.extra_sets" in heldout_section(html)
    assert "<h3>Second held-out set" not in html


def test_second_heldout_set_title_and_source_are_escaped(fixture_data, figures):
    results, samples = copy.deepcopy(fixture_data)
    results = with_extra_set(results, title=PAYLOAD)
    results["extra_sets"]["mgsm_th"]["source"]["path"] = PAYLOAD
    page = render_report(results, samples, figures, TEMPLATE_DIR)
    assert "Second held-out set: &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert" not in page and not re.search(r"<[^<>]*\sonerror\s*=", page)
    tags = [t for t, _ in tags_of(page)]
    assert tags.count("script") == 1 and tags.count("img") == 8


def test_large_k_and_exact_kl_sections_render_from_their_numbers(fixture_data, tmp_path):
    """With results/passk/results.json merged in and kl_real holding the exact KL, the report shows both figures,
    both verdicts and the tables; without passk it says how to build it."""
    import numpy as np

    from thai_grpo_studies.large_k import large_k_results, plot_large_k
    from thai_grpo_studies.study_words import large_k_verdict
    from thai_grpo.report.results import with_kl_summary

    results, samples = copy.deepcopy(fixture_data)
    html = render_report(results, samples, {}, TEMPLATE_DIR)
    assert "pass@k to k = 64: not run" in html and "snakemake --cores 2 passk" in html
    rng = np.random.default_rng(0)
    counts = {"sft": rng.integers(0, 9, 30), "grpo": rng.integers(2, 17, 30)}
    results["passk"] = {**large_k_results({m: {"n_samples": 16, "per_problem_correct": c.tolist()}
                                           for m, c in counts.items()}, n_boot=200),
                        "problems_chosen": "the first 30 of results/data/heldout.jsonl"}
    results["passk"]["verdict"] = large_k_verdict(results["passk"])  # stored by the passk study
    tokens = len(results["kl_real"]["logp_policy"])
    results["kl_real"] = with_kl_summary({**results["kl_real"], "kl_exact": rng.uniform(0, 0.1, tokens).tolist(),
                                          "var_k1": rng.uniform(0, 0.01, tokens).tolist(),
                                          "var_k3": rng.uniform(0, 0.02, tokens).tolist(),
                                          "completion_lengths": [1] * tokens,
                                          "completion_problems": [i // 8 for i in range(tokens)]}, 200, 0)
    figures = draw_all({"kl_real": results["kl_real"]}, tmp_path)
    figures["pass_at_k_large"] = tmp_path / "pass_at_k_large.png"  # the passk study draws it, the figures rule copies it
    plot_large_k(results["passk"], figures["pass_at_k_large"])
    assert "k1_vs_k3_real" in figures and figures["pass_at_k_large"].stat().st_size > 0
    html = render_report(results, samples, figures, TEMPLATE_DIR)
    assert "On 30 held-out problems x 16 samples, GRPO - SFT is" in html and "GRPO created" in html
    assert 'alt="pass@k to large k"' in html and "pass@k to k = 64: not run" not in html
    assert f"On {tokens:,} sampled tokens of {tokens} completions the exact KL" in html
    assert 'class="numbers kl-regimes"' in html


def test_hacking_experiment_renders_its_rows_and_verdicts_or_says_how_to_build_it(fixture_data):
    """With results/hacking/results.json merged in, the main report shows each run's start -> last-third moves and the
    run's own verdict sentences, escaped; without it, how to build the experiment."""
    from thai_grpo_studies.hacking import hacking_results, main_report_rows

    results, samples = copy.deepcopy(fixture_data)
    html = render_report(results, samples, {}, TEMPLATE_DIR)
    assert "reward-hacking experiment: not built" in html and "snakemake --cores 2 hacking" in html

    def steps(format_reward, empty_start, empty_end, accuracy):
        return [{"step": s, "reward_mean": 0.5 + 0.01 * s, "accuracy": accuracy, "empty_think_share": e,
                 "blank_think_share": 0.0, "hollow_think_paid_share": e, "clipped_ratio": 0.0,
                 "completion_length_mean": 20.0, "kl": 0.0,
                 "rewards": {"correct": accuracy, format_reward: 0.3, "thai": 0.2}}
                for s, e in zip(range(1, 13), [empty_start] + [empty_end] * 11)]

    trains = {"hack_lenient": {"steps": steps("format_lenient", 0.3, 0.9, 0.2), "empty_think_examples": []},
              "hack_strict": {"steps": steps("format", 0.3, 0.0, 0.2), "empty_think_examples": []}}
    plans = {"hack_lenient": {"rewards": ["correct", "format_lenient", "thai"], "grpo": {"max_completion_length": 32}},
             "hack_strict": {"rewards": ["correct", "format", "thai"], "grpo": {"max_completion_length": 32}}}
    results["hacking"] = hacking_results(trains, plans, {"empty_think_share": 0.2, "one_line_think_share": 0.0}, {})
    results["hacking"]["verdicts"]["hack_strict"] = PAYLOAD
    results["hacking"]["report"] = main_report_rows(results["hacking"])  # the rows the study stores, with the payload
    html = render_report(results, samples, {}, TEMPLATE_DIR)
    assert "reward-hacking experiment: not built" not in html
    section = html[html.index('id="hacking"'):]
    assert "<th>hack_lenient</th><td>format_lenient</td>" in section
    assert "30.0% &rarr; 90.0%" in section  # the lenient run's paid hollow think blocks, step 1 -> last third
    # the same computed wording as the hacking page: title, outcome, verdict and the detector's simulated rates
    outcome = "hack_lenient hacked (steps 3-12) and stayed in the hack to the end"
    assert results["hacking"]["title"] == f"Reward hacking: {outcome}; hack_strict did not hack"
    assert f'id="hacking">Reward hacking: {outcome}; hack_strict did not hack (<code>' in html
    assert "hack_lenient (lenient regex &lt;think&gt;.*?&lt;/think&gt;) hacked (steps 3-12)" in section
    rates = results["hacking"]["runs"]["hack_lenient"]["rates"]
    assert f"false positives {100 * rates['false_positive_rate']:.1f}%" in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section and "<script>alert" not in html


def test_headline_says_one_chain_until_the_chain_study_exists_then_its_verdict(fixture_data, figures, html):
    """Without results/chains the headline says its numbers come from one chain; with a chain study it gives the
    study's GRPO - SFT sentence (per-chain differences, family, verdict) and the section lists every pair."""
    from thai_grpo_studies.chain_stats import chain_study
    from thai_grpo_studies.study_words import with_sentences

    assert "One chain" in unescape(html) and "snakemake --cores 2 chains" in unescape(html)
    results, samples = copy.deepcopy(fixture_data)
    runs = {"sft": [], "grpo": []}
    for seed, shift in ((42, 0), (1, 1), (2, -1)):
        for model in runs:
            scores = copy.deepcopy(results["eval"][model])
            scores["per_problem_correct"] = [min(scores["n_samples"], max(0, c + shift))
                                             for c in scores["per_problem_correct"]]
            runs[model].append({"seed": seed, "scores": scores})
    study = chain_study(runs, n_boot=500, seed=0, metrics=("pass@1",))
    study["pairs"] = {metric: with_sentences(tests, 3) for metric, tests in study["pairs"].items()}  # as the study does
    results["chain_study"] = {**study, "default_seed": 42, "num_problems": 10, "n_samples": 8}
    text = unescape(render_report(results, samples, figures, TEMPLATE_DIR))
    assert "One chain" not in text
    headline = text.split('id="headline"')[1].split("</section>")[0]
    assert "Across chains" in headline and "over 3 chains" in headline
    assert "primary comparison, tested alone at 5%" in headline and "crossed 95% interval" in headline
    assert "Across chains: does a difference survive another base and SFT adapter?" in text


# --------------------------------------------------------------------------- the lessons' numbers and verdicts
def test_figure_5_1_lesson_reads_the_mixed_group():
    from thai_grpo.report.lessons import advantage_lesson

    lesson = advantage_lesson({"rewards": [1.5, 0.3, 0.5, 1.5, 0.0], "advantages": [1.1, -0.6, -0.3, 1.1, -1.3]})
    assert lesson == {"best": 1.5, "best_up": True, "positive_down": [0.3, 0.5], "agrees": True}
    assert advantage_lesson({"rewards": [0.2, 0.0], "advantages": [-0.7, 0.7]})["agrees"] is False
    assert advantage_lesson(None) is None


def test_training_curve_lesson_compares_the_first_and_last_third():
    from thai_grpo.report.lessons import curve_lesson

    steps = [{"reward_mean": r, "frac_groups_nonzero_std": 0.5, "accuracy": a, "completion_length_mean": 40}
             for r, a in [(0.2, 0.1), (0.3, 0.2), (0.5, 0.3), (0.6, 0.3), (0.8, 0.4), (0.9, 0.5)]]
    lesson = curve_lesson(steps)
    assert lesson["reward_climbs"] and lesson["steps"] == 6
    assert lesson["means"]["reward_mean"] == pytest.approx((0.25, 0.85))
    assert not curve_lesson(list(reversed(steps)))["reward_climbs"] and curve_lesson(steps[:1]) is None


def test_elapsed_time_spans_the_first_start_to_the_last_end(tmp_path):
    import os

    from thai_grpo.report.results import elapsed_seconds

    for stage, seconds, end in (("a", 10.0, 1000.0), ("b", 30.0, 1025.0), ("other", 5.0, 5000.0)):
        path = tmp_path / f"{stage}.tsv"
        path.write_text(f"s\th:m:s\n{seconds}\t0:00:{seconds:02.0f}\n")
        os.utime(path, (end, end))
    assert elapsed_seconds(tmp_path, {"a": 10.0, "b": 30.0}) == 35.0  # 990 -> 1025, less than 10 + 30 summed
    assert elapsed_seconds(tmp_path / "none", {"a": 1.0}) is None


def test_wall_time_is_elapsed_and_the_sum_is_labelled_job_time(fixture_data, figures):
    results, samples = copy.deepcopy(fixture_data)
    results["run"]["elapsed_seconds"] = 201.0
    card = render_report(results, samples, figures, TEMPLATE_DIR).split('<section id="run-card" class="part">')[1]
    assert "first job's start to the last job's end: <strong>3 min 21.0 s</strong>" in card
    assert '<tr class="total"><td>summed job time</td>' in card
    without = render_report(fixture_data[0], fixture_data[1], figures, TEMPLATE_DIR)
    assert "the last job's end: <strong>not recorded</strong>" in without


def test_a_stored_group_shows_its_gold_answer_and_a_column_per_reward(fixture_data, figures):
    results, samples = copy.deepcopy(fixture_data)
    group = results["train"]["example_groups"]["mixed"]
    group.update(gold=42, reward_parts=[{"correct": 1.0 if r >= 1 else 0.0, "format": 0.3} for r in group["rewards"]])
    page = render_report(results, samples, figures, TEMPLATE_DIR).split('<section id="groups">')[1]
    table = page.split("</details>")[0]
    assert "gold answer 42" in table
    assert "<th>#</th><th>correct</th><th>format</th><th>reward</th>" in table
    assert table.count("<td>0.3</td>") == len(group["rewards"])


def test_polish_lesson_says_it_in_words_and_the_narrowing_test_sits_in_the_appendix(fixture_data, figures):
    results, samples = copy.deepcopy(fixture_data)
    results.setdefault("comparison", {})["narrowing"] = {
        "weaker": "sft", "stronger": "grpo", "k": 4, "gap_at_k": 0.11, "null_gap_at_k": 0.16, "excess_narrowing": 0.05,
        "low": 0.02, "high": 0.08, "verdict": "polish"}
    page = render_report(results, samples, figures, TEMPLATE_DIR)
    lesson = page.split('<section id="polish">')[1].split("</section>")[0]
    assert "(polish, not create)" in lesson and "excess narrowing" not in lesson and 'href="#narrowing-test"' in lesson
    test = page.index('<p id="narrowing-test">')
    assert test > page.index('<div id="appendix"') and "excess narrowing +5.0 points" in page[test:test + 400]


def test_stored_groups_and_samples_carry_one_problem_number(fixture_data, figures, html):
    results, samples = fixture_data
    groups = html.split('<section id="groups">')[1].split("</section>")[0]
    assert groups.count('<details class="group">') == len(results["train"]["example_groups"])
    side = html.split('<section id="samples">')[1].split("</section>")[0]
    for number, problem in enumerate(next(iter(samples.values()))[:SIDE_BY_SIDE_PROBLEMS], 1):
        assert f'<th title="{problem["id"]}"><span class="problem">held-out problem {number}</span>' in side
        assert f'<strong title="{problem["id"]}">held-out problem {number}</strong>' in html  # the appendix's
    assert side.count('<tr><th title=') == min(SIDE_BY_SIDE_PROBLEMS, len(next(iter(samples.values()))))


def test_first_screen_says_how_the_offline_data_leaves_grpo_room(fixture_data, figures):
    results, samples = copy.deepcopy(fixture_data)
    results["config"].setdefault("corpus", {})["sft_slip_rate"] = 0.35
    page = render_report(results, samples, figures, TEMPLATE_DIR)
    screen = page.split('<header id="glance"')[1].split("</header>")[0]
    assert "room to polish: 35% of the SFT data's worked solutions carry a deliberate arithmetic slip" in screen


def test_model_series_never_take_the_colours_of_higher_and_lower(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from thai_grpo.report import figures
    from thai_grpo.report.figures_gains import VERDICT_COLOURS

    drawn = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path: (
        drawn.extend(line.get_color() for ax in fig.axes for line in ax.lines), plt.close(fig)))
    models = ("base", "sft", "grpo", "dr_grpo", "dpo", "ppo", "rloo")
    figures.plot_pass_at_k({m: {"pass_at_k_curve": [0.1, 0.2]} for m in models}, tmp_path / "p.png")
    taken = {VERDICT_COLOURS["higher"], VERDICT_COLOURS["lower"], "#2ca02c", "#d62728"}  # ours, and tab10's
    assert len(drawn) == len(models) and not taken & {c.lower() for c in drawn}, drawn
