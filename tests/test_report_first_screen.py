"""The report at a glance: its first screen (the headline, the gains figure, the health line) and every word that
depends on the run, checked against results.json for two runs built as the results rule builds them: the offline
default (a tiny Qwen3 on a CPU) and one shaped like the real run (Qwen/Qwen3-0.6B on a GPU, the real config's
methods). tests/report_documents.py makes both; the smoke run's recorded results.json is checked too."""

from __future__ import annotations

import copy
import json
import re
from html import unescape
from pathlib import Path

import pytest
from report_documents import QWEN3_PARAMETERS, SMOKE_RUN, offline_document, real_document
from workflow import load_report_fixture

from thai_grpo.report import glance, run_words
from thai_grpo.report.figures import draw_all
from thai_grpo.report.figures_gains import VERDICT_COLOURS, gains_figure
from thai_grpo.report.html import render_report
from thai_grpo.report.plan_words import VERDICT_WORDS
from thai_grpo.report.results import chapter_token_budget, run_device, trainer_device

ROOT = Path(__file__).resolve().parent.parent
FLIP = {"higher": "lower", "lower": "higher"}


@pytest.fixture(scope="module")
def documents() -> dict[str, dict]:
    return {"offline": offline_document(), "real": real_document()}


@pytest.fixture(scope="module")
def pages(documents, tmp_path_factory) -> dict[str, str]:
    """Each document's report as the pipeline renders it (figures drawn by draw_all)."""
    _, samples = load_report_fixture()
    out = tmp_path_factory.mktemp("first-screen")
    return {name: render_report(results, samples, draw_all(results, out / name)) for name, results in documents.items()}


def visible_text(html: str) -> str:
    """The page's words as a reader sees them: no tags, no data URIs, no pre-formatted config dump."""
    html = re.sub(r'src="data:[^"]*"', "", html)
    html = re.sub(r"<details><summary>Full pipeline configuration.*?</details>", "", html, flags=re.S)
    html = re.sub(r"<(style|script)>.*?</\1>", "", html, flags=re.S)
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def first_screen(html: str) -> str:
    return visible_text(html.split('<header id="glance"')[1].split(">", 1)[1].split("</header>")[0])


def run_card_row(html: str, name: str) -> str:
    card = html.split('<section id="run-card" class="part">')[1].split("</table>")[0]
    return visible_text(card.split(f"<th>{name}</th>")[1].split("</tr>")[0]).strip()


def expected_test(results: dict, model: str, metric: str = "pass@1") -> dict | None:
    """The pairwise test of model - SFT read straight from comparison.pairwise, turned to read model - SFT."""
    for t in results["comparison"]["pairwise"]:
        if t["metric"] == metric and {t["a"], t["b"]} == {model, "sft"}:
            if t["a"] == model:
                return t
            return {**t, "mean_diff": -t["mean_diff"], "ci_low": -t["ci_high"], "ci_high": -t["ci_low"],
                    "verdict": FLIP.get(t["verdict"], t["verdict"])}
    return None


# --------------------------------------------------------------------------- the gains over SFT
@pytest.mark.parametrize("name", ["offline", "real"])
def test_gain_rows_are_every_compared_model_in_eval_models_order_with_the_notes_test(documents, name):
    results = documents[name]
    rows = glance.gain_rows(results)
    assert [r["model"] for r in rows] == [m for m in results["config"]["eval"]["models"] if m != "sft"]
    for row in rows:
        test = expected_test(results, row["model"])
        assert row["mean_diff"] == pytest.approx(test["mean_diff"])
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((test["ci_low"], test["ci_high"]))
        assert row["verdict"] == test["verdict"] and row["word"] == VERDICT_WORDS[test["verdict"]]
    assert len({r["verdict"] for r in rows}) >= 3, "the documents should exercise several verdicts"


def test_gains_figure_draws_each_row_its_interval_and_verdict(documents):
    results = documents["real"]
    rows = glance.gain_rows(results)
    fig = gains_figure(rows, "SFT", margin=0.05)
    ax, side = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == [glance.model_names(results)[r["model"]] for r in rows]
    bars = [patch for container in ax.containers for patch in container]
    assert len(bars) == len(rows)
    for y, (bar, row) in enumerate(zip(bars, rows)):
        test = expected_test(results, row["model"])
        assert bar.get_x() == pytest.approx(100 * test["ci_low"])
        assert bar.get_width() == pytest.approx(100 * (test["ci_high"] - test["ci_low"]))
        assert bar.get_y() + bar.get_height() / 2 == pytest.approx(y)
    words = {t.get_text(): t for t in side.texts}
    for row in rows:
        test = expected_test(results, row["model"])
        label = words[VERDICT_WORDS[test["verdict"]]]
        assert label.get_color() == VERDICT_COLOURS[test["verdict"]]
    assert any(abs(line.get_xdata()[0]) < 1e-12 for line in ax.lines), "a line at zero difference"


def test_a_model_without_a_test_is_a_row_without_a_bar(documents):
    results = copy.deepcopy(documents["real"])
    results["comparison"]["pairwise"] = [t for t in results["comparison"]["pairwise"]
                                         if {t["a"], t["b"]} != {"dpo", "sft"}]
    rows = glance.gain_rows(results)
    dpo = next(r for r in rows if r["model"] == "dpo")
    assert dpo["word"] == "no paired test" and dpo["mean_diff"] is None
    ax = gains_figure(rows).axes[0]
    assert sum(len(c) for c in ax.containers) == len(rows) - 1


def test_the_figures_rule_draws_the_gains_only_where_there_are_tests(documents, tmp_path):
    assert "gains_over_sft" in draw_all(documents["real"], tmp_path / "real")
    results, _ = load_report_fixture()  # no comparison.pairwise: nothing to draw
    assert "gains_over_sft" not in draw_all(results, tmp_path / "small")


# --------------------------------------------------------------------------- the first screen
@pytest.mark.parametrize("name", ["offline", "real"])
def test_first_screen_is_headline_then_gains_then_health_before_the_sentences(documents, pages, name):
    results, html = documents[name], pages[name]
    assert html.index('id="headline-sentence"') < html.index('id="gains"') < html.index('id="health-line"') \
        < html.index('<section id="headline"') < html.index('<section id="run-card" class="part">')
    screen = first_screen(html)
    test = expected_test(results, "grpo")
    signed = lambda v: f"{100 * v:+.1f}"  # noqa: E731
    assert (f"GRPO - SFT, held-out pass@1: {signed(test['mean_diff'])} points, paired 95% interval "
            f"[{signed(test['ci_low'])}, {signed(test['ci_high'])}] over problems") in screen
    # plain words on screen 1; how the plan decided it is a link's title, and the statistics note in the appendix
    assert f"{VERDICT_WORDS[test['verdict']]} (how this is decided)" in screen and "tested alone" not in screen
    assert '<a class="family" href="#statistics" title="primary comparison, tested alone at 5%">' in html
    assert 'alt="held-out pass@1 minus SFT: Base (no adapter) ' in html and "data:image/png;base64," in html
    # the per-method sentences follow, each method once, without the health flags the first screen shows
    box = html.split('<section id="headline"')[1].split("</section>")[0]
    assert re.findall(r"<li><strong>([^<]+)</strong>", box) == [
        m["method"] for m in results["comparison"]["methods"] if m["run"]]
    assert 'class="flag' not in box


def test_health_line_names_every_flagged_run(documents, pages):
    results, screen = documents["real"], first_screen(pages["real"])
    runs, names = results["runs"], glance.model_names(results)
    assert f"Training health, GRPO: truncation: {'FLAGGED' if results['train']['health']['truncation_failed'] else 'ok'}" \
        in screen
    flagged = [names[m] for m in results["config"]["eval"]["models"]
               if m in runs and m != "grpo" and runs[m]["steps"] and runs[m]["health"]["truncation_failed"]]
    assert flagged, "the smoke run's steps truncate in some runs"
    for name in flagged:
        assert f"{name} (truncation)" in screen
    assert "DPO (" not in screen.split("other runs:")[1]  # DPO samples nothing while training: no health checks


# --------------------------------------------------------------------------- the run's own words
def test_real_run_says_what_it_is_and_never_tiny_or_cpu(pages):
    html = pages["real"]
    text, screen = visible_text(html), first_screen(html)
    assert "Qwen/Qwen3-0.6B, 596M parameters, with the SFT adapter kobkrit/qwen3-0.6b-th-sft-lora" in screen
    assert "trained further on a GPU" in screen
    assert not re.search(r"tiny|cpu", text, re.I), re.search(r".{60}(tiny|cpu).{60}", text, re.I).group(0)
    assert run_card_row(html, "Ran on").startswith("GPU, bf16 mixed precision: grpo, dr_grpo, dpo")
    assert run_card_row(html, "Base parameters") == f"{QWEN3_PARAMETERS:,}"
    assert "Every setting the chapter fixes is the chapter's." in screen
    assert "share no normalized text with any training set (text hash" in text  # real data: no skeletons


def test_offline_run_says_it_ran_on_a_cpu_with_the_tiny_base(pages):
    html = pages["offline"]
    screen = first_screen(html)
    assert screen.lstrip().startswith("GRPO on Thai grade-school math Tiny Qwen3 trained from scratch (shipped")
    assert "trained further on a CPU" in screen and "GPU" not in visible_text(html)
    assert run_card_row(html, "Ran on").startswith("CPU, float32: grpo, dr_grpo, dpo")
    assert "2 settings depart from the chapter's experiment" in screen
    assert "which on a CPU holds the models" in visible_text(html)


def test_a_run_card_without_a_device_reads_the_torch_build_or_says_not_recorded():
    smoke = json.loads(SMOKE_RUN.read_text(encoding="utf-8"))  # written before the run card kept the device
    assert "device" not in smoke["run"] and smoke["run"]["versions"]["torch"].endswith("+cpu")
    assert run_words.lead({"run": smoke["run"]})["device"] == "a CPU"
    assert run_words.device_text(smoke["run"]) == f"CPU (torch {smoke['run']['versions']['torch']} is a CPU-only build)"
    small, samples = load_report_fixture()
    assert run_words.lead({"run": small["run"]})["device"] is None and run_words.device_text(small["run"]) == "not recorded"
    lead = re.search(r'<p class="lead">(.*?)</p>', render_report(small, samples, {}), re.S).group(1)
    assert "trained further with GRPO" in lead and " on a " not in lead


def test_the_device_comes_from_each_trainers_precision_flags():
    assert trainer_device({"use_cpu": True, "bf16": False}) == {"device": "cpu", "precision": "float32"}
    assert trainer_device({"use_cpu": False, "bf16": True}) == {"device": "gpu", "precision": "bf16 mixed precision"}
    assert trainer_device({"use_cpu": False, "fp16": True}) == {"device": "gpu", "precision": "fp16 mixed precision"}
    assert trainer_device({"use_cpu": False}) is None and trainer_device(None) is None
    mixed = run_device({"grpo": {"resolved_args": {"fp16": True}}, "dpo": {"resolved_args": {"use_cpu": True}},
                        "ppo": {"args": {"batch_size": 64}}})
    assert mixed["kind"] == "cpu and gpu" and set(mixed["stages"]) == {"grpo", "dpo"}
    assert run_device({})["kind"] is None


def test_memory_and_supervision_words_follow_the_methods_present(documents, pages):
    real = visible_text(pages["real"])
    assert "In memory: PPO keeps 4 (policy, reference, reward model, value model" in real
    assert "DPO, GRPO and Dr.GRPO keep 2 (policy, reference; one shared base with LoRA)" in real
    assert "no reward model, no value network" not in real.lower()
    assert ("human labels go from one reference answer per example (SFT), to preference pairs, here ranked by the "
            "verifier (PPO, DPO), to none, only a verifier (GRPO, Dr.GRPO)") in real
    results, samples = load_report_fixture()  # base, SFT and GRPO only
    small = visible_text(render_report(results, samples, {}))
    assert "In memory: GRPO keeps 2" in small and "PPO" not in first_screen(render_report(results, samples, {}))
    assert "reward model of" not in small and "DPO samples none" not in small


def test_token_budget_is_the_chapters_full_run(pages):
    budget = chapter_token_budget()
    assert budget == {"problems": 128, "completions": 8, "max_completion_length": 256, "tokens": 262_144}
    text = visible_text(pages["real"])
    assert ("the chapter's full real configuration (128 problems x 8 completions, up to 256 tokens each) generates at "
            "most 262,144") in text
    assert "seed's estimate" not in text


def test_the_template_holds_no_claim_about_the_run():
    template = re.sub(r"\s+", " ", (ROOT / "report" / "template.html.j2").read_text(encoding="utf-8"))
    for claim in ("tiny", "a CPU run", "GPU memory", "seed's estimate", "No human labels, no reward model",
                  "A small causal LM", "128 problems", "(PPO, DPO)", "Three GRPO runs", "4 models in memory"):
        assert claim not in template, claim


def test_word_helpers():
    assert [run_words.count_words(n) for n in (596_049_920, 1_117_184, 28_608, 448, None)] == \
        ["596M", "1.12M", "28.6K", "448", None]
    assert [run_words.join_words(w) for w in (["a"], ["a", "b"], ["a", "b", "c"])] == ["a", "a and b", "a, b and c"]
    assert run_words.reward_words(["correct", "format_lenient"]) == \
        "correct answer +1.0, think block, empty allowed, +0.3"


def test_the_offline_first_screen_says_how_its_sft_data_leaves_grpo_room_and_the_real_one_does_not(pages):
    slip = "Built to leave GRPO room to polish: 35% of the SFT data's worked solutions carry a deliberate arithmetic slip"
    assert slip in first_screen(pages["offline"])  # config/config.yaml: corpus.sft_slip_rate 0.35
    assert "deliberate arithmetic slip" not in pages["real"]  # the hub's SFT adapter: no offline corpus
