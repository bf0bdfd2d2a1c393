"""`make compare BEFORE=DIR`: two runs of the smoke config (its results.json, and a copy with GRPO's per-problem
counts and grpo.beta changed, its held-out problems stored in another order) compared as the user's guide shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from workflow import FIXTURES, REPO

from thai_grpo.evaluation.intervals import paired_bootstrap_test
from thai_grpo.evaluation.plan import holm_adjust
from thai_grpo_tools.compare_runs import compare_runs, config_differences, load_run, render_text

IDS = [f"problem-{i}" for i in range(8)]
GRPO_BEFORE = [1, 0, 2, 0, 1, 1, 0, 0]  # correct of 4 samples, per problem in IDS order
GRPO_AFTER = [4, 4, 3, 2, 4, 4, 2, 3]  # every problem up: p at the bootstrap floor


def write_run(folder: Path, results: dict, ids: list[str]) -> Path:
    (folder / "data").mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(results), encoding="utf-8")
    (folder / "data" / "heldout.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids),
                                                   encoding="utf-8")
    return folder


@pytest.fixture
def runs(tmp_path) -> tuple[Path, Path]:
    """(before, after): the smoke run with GRPO's counts set to GRPO_BEFORE, and again at grpo.beta 0.08 with
    GRPO_AFTER, every model's problems stored in reverse order (eval/grpo/samples.jsonl saying so)."""
    smoke = json.loads((FIXTURES / "results_smoke_run.json").read_text(encoding="utf-8"))
    assert all(len(scores["per_problem_correct"]) == len(IDS) for scores in smoke["eval"].values())
    before = json.loads(json.dumps(smoke))
    before["eval"]["grpo"]["per_problem_correct"] = GRPO_BEFORE
    after = json.loads(json.dumps(smoke))
    after["config"]["grpo"]["beta"] = 0.08
    for scores in after["eval"].values():
        scores["per_problem_correct"] = scores["per_problem_correct"][::-1]
    after["eval"]["grpo"]["per_problem_correct"] = GRPO_AFTER[::-1]
    after_dir = write_run(tmp_path / "results", after, IDS[::-1])
    (after_dir / "eval" / "grpo").mkdir(parents=True)
    (after_dir / "eval" / "grpo" / "samples.jsonl").write_text(
        "".join(json.dumps({"id": i, "completions": []}) + "\n" for i in IDS[::-1]), encoding="utf-8")
    return write_run(tmp_path / "results-before", before, IDS), after_dir


def compare(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "thai_grpo_tools.compare_runs", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_compares_each_model_of_two_runs_on_the_same_problems(runs, tmp_path):
    before, after = runs
    done = compare("--before", "results-before", "--json", "comparison.json", cwd=tmp_path)  # --after: results
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith(f"before: {before}  (commit not recorded)\nafter:  {after}  (commit not recorded)\n")
    assert "on the same 8 problems, paired by id" in out
    grpo = re.search(r"^grpo +0\.1562 +0\.8125 +\+0\.6562 +\[(\S+), (\S+)\]", out, re.M)
    assert grpo, out
    for model in ("base", "sft", "dr_grpo", "rloo", "dpo", "ppo"):
        assert re.search(rf"^{model} +0\.0000 +0\.0000 +\+0\.0000 ", out, re.M), model
    assert "config keys that differ (1, before -> after):\n  grpo.beta: 0.04 -> 0.08" in out
    assert "pass@1 moved at alpha 0.05 (Holm over 7 models): grpo +0.6562 (Holm p <=0.0348)" in out

    written = json.loads((tmp_path / "comparison.json").read_text(encoding="utf-8"))
    row = next(r for r in written["models"] if r["model"] == "grpo")
    assert (float(grpo.group(1)), float(grpo.group(2))) == (round(row["ci_low"], 4), round(row["ci_high"], 4))
    assert written["config_differences"] == [{"key": "grpo.beta", "before": 0.04, "after": 0.08}]


def test_the_difference_and_its_interval_are_the_paired_bootstrap_over_problems(runs):
    before, after = runs
    comparison = compare_runs(load_run(before), load_run(after))
    smoke = json.loads((FIXTURES / "results_smoke_run.json").read_text(encoding="utf-8"))["config"]["eval"]
    assert (comparison["n_resamples"], comparison["seed"]) == (smoke["bootstrap_samples"], smoke["seed"])
    expected = paired_bootstrap_test(np.array(GRPO_AFTER) / 4, np.array(GRPO_BEFORE) / 4,
                                     n_boot=smoke["bootstrap_samples"], seed=smoke["seed"])
    rows = {r["model"]: r for r in comparison["models"]}
    grpo = rows["grpo"]
    assert (grpo["pass@1_before"], grpo["pass@1_after"]) == (np.mean(GRPO_BEFORE) / 4, np.mean(GRPO_AFTER) / 4)
    for key in ("mean_diff", "ci_low", "ci_high", "p_value", "p_at_floor"):
        assert grpo[key] == pytest.approx(expected[key]), key
    assert [r["p_holm"] for r in comparison["models"]] == holm_adjust([r["p_value"] for r in comparison["models"]])
    assert grpo["moved"] and not any(r["moved"] for name, r in rows.items() if name != "grpo")
    assert all(r["mean_diff"] == r["ci_low"] == r["ci_high"] == 0 for name, r in rows.items() if name != "grpo")


def test_a_run_compared_with_itself_is_said_to_be_the_same_on_every_problem(runs):
    before, _ = runs
    text = render_text(compare_runs(load_run(before), load_run(before)))
    assert "Every model solved each problem exactly as often in both runs." in text
    assert "config: identical in both runs" in text

def test_a_commit_the_run_card_records_names_the_run(runs):
    before, after = runs
    results = json.loads((before / "results.json").read_text(encoding="utf-8"))
    results["run"]["commit"] = "26f3543"
    (before / "results.json").write_text(json.dumps(results), encoding="utf-8")
    comparison = compare_runs(load_run(before), load_run(after))
    assert (comparison["before"]["commit"], comparison["after"]["commit"]) == ("26f3543", None)


def test_held_out_sets_that_differ_are_refused_in_one_line(runs, tmp_path):
    before, _ = runs
    (before / "data" / "heldout.jsonl").write_text(
        "".join(json.dumps({"id": i}) + "\n" for i in ["another", *IDS[1:]]), encoding="utf-8")
    done = compare("--before", str(before), cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == ("compare: the held-out sets differ: 8 problems before, 8 after, 7 in common: "
                                   "compare two runs of the same data settings")


def test_a_model_scored_on_other_problems_than_the_other_run_is_refused(runs, tmp_path):
    before, after = runs
    (after / "eval" / "grpo" / "samples.jsonl").write_text(
        "".join(json.dumps({"id": i}) + "\n" for i in ["elsewhere", *IDS[1:]]), encoding="utf-8")
    done = compare("--before", str(before), "--after", str(after), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == ("compare: grpo was scored on other problems in the two runs "
                                   "(eval/grpo/samples.jsonl): rerun it with `make run`")

def test_a_folder_that_is_not_a_finished_run_is_refused_in_one_line(runs, tmp_path):
    (tmp_path / "unfinished" / "data").mkdir(parents=True)
    done = compare("--before", "unfinished", cwd=tmp_path)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "unfinished is not a finished run (no results.json): finish it with `make run`" in done.stderr


def test_a_copy_made_inside_an_existing_folder_is_named(runs, tmp_path):
    before, after = runs
    nested = tmp_path / "kept"
    nested.mkdir()
    after.rename(nested / "results")  # what `cp -r results kept` does when kept/ exists
    refused = compare("--before", "kept", "--after", str(before), cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (f"compare: {nested} holds a run in results/ (`cp -r results DIR` into an "
                                      f"existing DIR copies inside it): name {nested / 'results'}")


def test_config_differences_are_dotted_keys_with_absent_ones_named():
    before = {"grpo": {"beta": 0.04, "top_k": 0}, "eval": {"models": ["base", "grpo"]}, "seed": 42}
    after = {"grpo": {"beta": 0.04}, "eval": {"models": ["base", "grpo", "rloo"]}, "seed": 42, "extra": {"x": 1}}
    assert config_differences(before, after) == [
        {"key": "eval.models", "before": ["base", "grpo"], "after": ["base", "grpo", "rloo"]},
        {"key": "extra.x", "before": "(absent)", "after": 1},
        {"key": "grpo.top_k", "before": 0, "after": "(absent)"},
    ]


def test_make_compare_runs_the_two_run_comparison_with_before_and_the_reference_comparison_without():
    def recipe(*words: str) -> str:
        done = subprocess.run(["make", "-n", "compare", *words], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "thai_grpo_tools.compare_runs --before results-before" in recipe("BEFORE=results-before")
    assert "thai_grpo_tools.compare_runs --before x --after y" in recipe("BEFORE=x", "AFTER=y")
    without = recipe()
    assert "thai_grpo_tools.reference compare" in without and "compare_runs" not in without


def test_the_guide_ends_change_a_knob_with_the_comparison_of_two_runs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Change a knob\n")[1].split("\n## ")[0]
    last_block = re.findall(r"^```bash\n(.*?)^```", section, re.S | re.M)[-1]
    assert last_block.splitlines()[-1].split("#")[0].strip() == "make compare BEFORE=results-before"
    assert "cp -r results results-before" in last_block


def test_a_run_records_the_commit_of_its_checkout_marked_when_files_differ(tmp_path):
    """results.json's run.commit (what make compare names a run by): the checkout's short HEAD, marked when a tracked
    file differs from it, "unknown" outside a git checkout."""
    import subprocess

    from thai_grpo.jobs.machine import commit_of

    assert commit_of(tmp_path) == "unknown"
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "config.yaml").write_text("seed: 1\n")
    subprocess.run([*git, "add", "config.yaml"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert commit_of(tmp_path) == head
    (tmp_path / "config.yaml").write_text("seed: 2\n")
    assert commit_of(tmp_path) == f"{head} with uncommitted changes"
