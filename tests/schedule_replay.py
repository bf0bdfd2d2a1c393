"""Snakemake's schedule replayed on the workflow's DAG at measured job seconds, for tests/test_speedup.py: every job
with its threads, priority and dependencies (Snakemake's own DAG), and the jobs its scheduler starts each time one
ends."""

from __future__ import annotations

from pathlib import Path


def job_name(rule: str, wildcards: dict) -> str:
    """A job's name as its benchmark file names it: ``train-grpo``, ``sample-base``, ``split``."""
    return "-".join([rule, *map(str, wildcards.values())])


def pick_jobs(ready: list[str], jobs: dict[str, dict], free: int) -> list[str]:
    """The jobs Snakemake starts from ``ready`` on ``free`` cores: the set that fits with the largest sum of priorities,
    then of threads (its ILP scheduler's objective), by an exact 0/1 knapsack over the cores; ties go to the earlier
    jobs of ``ready``."""
    best = [((0, 0), [])] * (free + 1)  # best[c]: ((priority sum, threads), jobs) using at most c cores
    for name in ready:
        weight, value = jobs[name]["threads"], jobs[name]["priority"]
        best = [max(best[c], ((best[c - weight][0][0] + value, best[c - weight][0][1] + weight),
                              best[c - weight][1] + [name]), key=lambda item: item[0])
                if c >= weight else best[c] for c in range(free + 1)]
    return best[free][1]


def simulate(seconds: dict[str, float], jobs: dict[str, dict], cores: int) -> dict[str, tuple[float, float]]:
    """(start, end) of every job of ``jobs`` (workflow_jobs: threads, priority, deps) run on ``cores`` as Snakemake
    schedules them (pick_jobs each time a job ends; a job's threads lowered to ``cores`` when above)."""
    jobs = {name: {**job, "threads": min(job["threads"], cores)} for name, job in jobs.items()}
    times: dict[str, tuple[float, float]] = {}
    now = 0.0
    while len(times) < len(jobs):
        done = {name for name, (_, end) in times.items() if end <= now}
        ready = [n for n in sorted(jobs) if n not in times and all(d in done for d in jobs[n]["deps"])]
        busy = sum(jobs[n]["threads"] for n, (_, end) in times.items() if end > now)
        started = pick_jobs(ready, jobs, cores - busy)
        for name in started:
            times[name] = (now, now + seconds.get(name, 0.0))
        if any(times[name][1] <= now for name in started):
            continue  # a job of no seconds ended as it started: choose again at the same moment
        later = [end for _, end in times.values() if end > now]
        if later:
            now = min(later)
        elif not started:
            raise ValueError("jobs left that can never start: a dependency outside ``jobs`` or a cycle")
    return times


def workflow_jobs(workdir: str | Path, configfiles: list[str] = (), targets: tuple[str, ...] = ("all",),
                  cores: int = 2) -> dict[str, dict]:
    """Every job of ``targets`` (as if from scratch) with its rule, wildcards, threads at ``cores``, Snakemake
    priority and the jobs it waits for, from Snakemake's own DAG (its Python API; nothing runs)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (ConfigSettings, DAGSettings, OutputSettings, ResourceSettings,
                                          StorageSettings)

    workdir = Path(workdir).resolve()
    with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
        workflow_api = api.workflow(resource_settings=ResourceSettings(cores=cores),
                                    config_settings=ConfigSettings(configfiles=[Path(c) for c in configfiles]),
                                    storage_settings=StorageSettings(), snakefile=workdir / "Snakefile",
                                    workdir=workdir)
        workflow_api.dag(DAGSettings(targets=set(targets), forceall=True))
        workflow = workflow_api._workflow  # the DAG itself is not part of the public API
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        dag = workflow.dag
        dag.update_priority()
        names = {job: job_name(job.rule.name, dict(job.wildcards_dict)) for job in dag.needrun_jobs()}
        return {names[job]: {"rule": job.rule.name, "wildcards": dict(job.wildcards_dict), "threads": job.threads,
                             "priority": dag.priority(job),
                             "deps": sorted({names[d] for d in dag.dependencies[job] if d in names})}
                for job in dag.needrun_jobs()}
