"""What a job ran on (thai_grpo.jobs.machine): the line every job's log starts with, and the count per CPU and commit
that the run card and each study's results carry."""

from __future__ import annotations

import json
import subprocess
import sys

from thai_grpo.jobs.machine import JOB_MACHINE, cpu_label, this_machine
from thai_grpo.report.results import jobs_ran_on, stage_logs


def machine_line(cpu: str, commit: str) -> str:
    return JOB_MACHINE + json.dumps({"cpu": cpu, "commit": commit}) + "\n"


def test_the_cpu_is_named_by_its_widest_vector_instructions():
    assert cpu_label("AMD EPYC", ["fpu", "avx2", "avx512f"]) == "AMD EPYC (AVX-512)"
    assert cpu_label("AMD EPYC", ["fpu", "avx2"]) == "AMD EPYC (AVX2)"
    assert cpu_label("Old", ["fpu"]) == "Old (no AVX2)"


def test_jobs_are_counted_per_cpu_and_commit_from_the_last_line_of_each_log(tmp_path):
    benchmarks, logs = tmp_path / "results/benchmarks", tmp_path / "results/logs"
    logs.mkdir(parents=True)
    (logs / "train-grpo.log").write_text(machine_line("A (AVX2)", "abc") + "training\n")
    (logs / "sample-grpo.log").write_text(machine_line("A (AVX2)", "abc"))
    # a job rerun on another machine appends to its log: the last line is where its output came from
    (logs / "score-grpo.log").write_text(machine_line("A (AVX2)", "abc") + machine_line("B (AVX-512)", "def"))
    (logs / "score-sft.log").write_text("a log of a job from before the machine line\n")
    stages = ["train-grpo", "sample-grpo", "score-grpo", "score-sft", "never-ran"]
    assert stage_logs(benchmarks, stages)[0] == logs / "train-grpo.log"
    assert jobs_ran_on(stage_logs(benchmarks, stages)) == [
        {"cpu": "A (AVX2)", "commit": "abc", "jobs": 2},
        {"cpu": "not recorded", "commit": "not recorded", "jobs": 2},
        {"cpu": "B (AVX-512)", "commit": "def", "jobs": 1}]
    assert jobs_ran_on([]) == []


def test_a_jobs_log_starts_with_the_machine_it_runs_on(tmp_path):
    """jobs.job.log_to, as every job script calls it first: this machine's CPU, and "unknown" outside a checkout."""
    log = tmp_path / "job.log"
    code = f"from thai_grpo.jobs.job import log_to; log_to({str(log)!r}); print('work')"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    first, second = log.read_text().splitlines()[:2]
    assert first == machine_line(this_machine()["cpu"], "unknown").rstrip("\n") and second == "work"
    assert jobs_ran_on([log]) == [{"cpu": this_machine()["cpu"], "commit": "unknown", "jobs": 1}]
