"""The start and the end of a job: its log, its device, its threads, its CUDA peak, and a quick exit."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from thai_grpo.jobs.devices import start_model_job
from thai_grpo.jobs.machine import JOB_MACHINE, this_machine


@contextlib.contextmanager
def model_job(smk):
    """A model job from Snakemake's ``snakemake`` object: its log, device, CUDA peak and threads; yields "cuda" or
    "cpu", and ends the process (``end_job``) once the block has written the outputs."""
    log_to(smk.log[0])
    device = start_model_job(smk.config)
    if device == "cuda":
        from thai_grpo.jobs.gpus import cuda_peak_writer
        from thai_grpo.jobs.memory_stages import note_free_memory

        note_free_memory(device)  # before any weights: what the job's `auto` sizes are computed from
        if (writer := cuda_peak_writer(smk.log[0])) is not None:  # where THAI_GRPO_CUDA_PEAKS asks for it
            at_job_end(writer)
    set_threads(smk.threads)
    yield device
    end_job()


def set_threads(threads: int | None) -> None:
    """Use the cores Snakemake gave the rule (``threads:``), no more: rules may run side by side."""
    import torch

    if threads:
        torch.set_num_threads(int(threads))
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))


def log_to(path: str | Path) -> None:
    """Send this process's stdout and stderr to a rule's ``log:`` file, which starts with the CPU and commit."""
    import sys

    handle = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr = handle
    print(JOB_MACHINE + json.dumps(this_machine()))


_AT_JOB_END: list = []


def at_job_end(function) -> None:
    """Run ``function`` when the job's process ends: at ``end_job``, or at the interpreter's exit (a failed job)."""
    import atexit

    atexit.register(function)
    _AT_JOB_END.append(function)


def end_job() -> None:
    """Run the ``at_job_end`` functions, flush, and exit without the interpreter's teardown, which frees nothing the OS
    does not and costs every model job over a second."""
    import logging
    import sys

    for function in _AT_JOB_END:
        function()
    logging.shutdown()
    for stream in filter(None, (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)):
        stream.flush()
    os._exit(0)
