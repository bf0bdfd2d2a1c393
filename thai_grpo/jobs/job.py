"""The start and the end of a job: its log, its device, its threads, its CUDA peak, and a quick exit.

``with model_job(snakemake) as device:`` is the first line of every script that loads a model; ``log_to`` alone that
of the other jobs.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from thai_grpo.jobs.devices import start_model_job
from thai_grpo.jobs.machine import JOB_MACHINE, this_machine


@contextlib.contextmanager
def model_job(smk):
    """A job that loads a model, from Snakemake's ``snakemake`` object: its output to its log (``log_to``), its device
    (``start_model_job``: a GPU of its own, the CPU as the config's ``device`` says, or a one-line stop, before any
    model), its peak CUDA memory under `make gpu-check` (``record_cuda_peak``) and the cores Snakemake gave it
    (``set_threads``: jobs run side by side). Yields "cuda" or "cpu"; once the block has written the outputs, the job
    ends without the interpreter's teardown (``end_job``). A block that raises fails the job as usual."""
    log_to(smk.log[0])
    device = start_model_job(smk.config)
    record_cuda_peak(smk.log[0])
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
    """Send this process's stdout and stderr (and so library logging) to a rule's ``log:`` file, which starts with
    the CPU and commit the job runs on (``jobs.machine``: the studies' results name them)."""
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
    """End a job's process now that its outputs are written: run the ``at_job_end`` functions, flush the log and the
    streams, then leave without the interpreter's teardown. Tearing down torch, transformers and a loaded model frees
    nothing the OS does not free at exit, and it took 1.1-1.5 s of every model job here (a 5.5 s held-out sampling
    job of the smoke config: 4.2-4.8 s without it). A job that fails raises before this line and exits as usual."""
    import logging
    import sys

    for function in _AT_JOB_END:
        function()
    logging.shutdown()
    for stream in filter(None, (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)):
        stream.flush()
    os._exit(0)


CUDA_PEAKS_ENV = "THAI_GRPO_CUDA_PEAKS"


def record_cuda_peak(log_path: str) -> None:
    """Where ``THAI_GRPO_CUDA_PEAKS`` names a folder (``scripts/gpu_check.sh`` sets it), write this job's peak CUDA
    memory there when its process ends (``<log name>.json``); otherwise do nothing."""
    folder = os.environ.get(CUDA_PEAKS_ENV)
    if not folder:
        return

    def write() -> None:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            Path(folder).mkdir(parents=True, exist_ok=True)
            record = {"job": Path(log_path).stem, "max_allocated_gib": torch.cuda.max_memory_allocated() / 2 ** 30,
                      "max_reserved_gib": torch.cuda.max_memory_reserved() / 2 ** 30}
            (Path(folder) / f"{record['job']}.json").write_text(json.dumps(record))

    at_job_end(write)
