"""A job's process ends without the interpreter's teardown (thai_grpo.jobs.job.end_job), and loses nothing on the way:
the log's last line, what ``at_job_end`` registered (the GPU check's peak-memory record), the exit status 0. A job
that fails before end_job still runs what was registered, at the interpreter's exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run_job(tmp_path, body: str) -> subprocess.CompletedProcess:
    script = textwrap.dedent(f"""
        from pathlib import Path
        from thai_grpo.jobs.job import at_job_end, end_job, log_to

        log_to({str(tmp_path / "job.log")!r})
        at_job_end(lambda: Path({str(tmp_path / "at_end.txt")!r}).write_text("ran"))
        print("last line, no newline flush asked", end="")
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def test_end_job_flushes_the_log_runs_what_was_registered_and_exits_0(tmp_path):
    done = run_job(tmp_path, """
        end_job()
        Path({!r}).write_text("after end_job")
    """.format(str(tmp_path / "after.txt")))
    assert done.returncode == 0, done.stderr
    machine, rest = (tmp_path / "job.log").read_text().split("\n", 1)  # log_to's first line: the job's machine
    assert machine.startswith("job ran on: ") and rest == "last line, no newline flush asked"
    assert (tmp_path / "at_end.txt").read_text() == "ran"
    assert not (tmp_path / "after.txt").exists()  # nothing runs after end_job


def test_a_failed_job_still_runs_what_was_registered(tmp_path):
    done = run_job(tmp_path, """
        raise SystemExit("the job failed")
    """)
    assert done.returncode == 1
    assert (tmp_path / "at_end.txt").read_text() == "ran"
