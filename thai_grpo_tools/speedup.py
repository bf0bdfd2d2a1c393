"""`make bench`'s speed-up estimate: the last run's jobs (Snakemake's DAG) and their measured seconds -> the critical
path, and on n cores the larger of it and the core-seconds / n (work and span, as in Brent's theorem: a floor a real
scheduler approaches when jobs are many and short), and Snakemake's own schedule replayed (``simulate``)."""

from __future__ import annotations

import csv
from pathlib import Path


def job_name(rule: str, wildcards: dict) -> str:
    """A job's name as its benchmark file names it: ``train-grpo``, ``sample-base``, ``split``."""
    return "-".join([rule, *map(str, wildcards.values())])


def critical_path(seconds: dict[str, float], deps: dict[str, list[str]]) -> tuple[float, list[str]]:
    """The longest chain of dependent jobs: (its seconds, its jobs in order). ``deps[job]`` are the jobs it waits for;
    a job without measured seconds counts 0."""
    finish: dict[str, tuple[float, list[str]]] = {}

    def longest(job: str, visiting: frozenset = frozenset()) -> tuple[float, list[str]]:
        if job in visiting:
            raise ValueError(f"dependency cycle through {job}")
        if job not in finish:
            before = [longest(d, visiting | {job}) for d in deps.get(job, [])]
            best = max(before, key=lambda item: item[0], default=(0.0, []))
            finish[job] = (best[0] + seconds.get(job, 0.0), best[1] + [job])
        return finish[job]

    jobs = set(seconds) | set(deps)
    return max((longest(job) for job in sorted(jobs)), key=lambda item: item[0], default=(0.0, []))


def cpu_seconds(seconds: dict[str, float], threads: dict[str, int]) -> float:
    """Core-seconds the run occupies: each job's wall seconds times the threads it holds."""
    return sum(s * threads.get(job, 1) for job, s in seconds.items())


def extrapolate(seconds: dict[str, float], deps: dict[str, list[str]], threads: dict[str, int],
                cores: list[int]) -> dict:
    """For each n in ``cores``: max(core-seconds / n, critical path), and the speed-up over the first n."""
    span, path = critical_path(seconds, deps)
    work = cpu_seconds(seconds, threads)
    walls = {n: max(work / n, span) for n in cores}
    first = walls[cores[0]]
    return {"critical_path_s": span, "critical_path": path, "core_seconds": work,
            "cores": {str(n): {"wall_s": walls[n], "speedup": first / walls[n],
                               "bound": "critical path" if span >= work / n else "work"} for n in cores}}


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


def rule_of(stage: str) -> str:
    """The rule a stage's benchmark name comes from: ``train-grpo`` -> ``train``, ``split`` -> ``split``."""
    return stage.split("-", 1)[0]


def stage_ratios(here: dict[str, float], there: dict[str, float],
                 rule_ranges: dict[str, tuple[float, float]] | None = None) -> dict:
    """How much longer each stage took on another CPU than here, from both CPUs' seconds of the same commit:
    ``{"stages": {stage: there / here}, "rules": {rule: median over its stages}, "median": over every stage}`` for
    the stages both measured (at least a second here). ``rule_ranges``: a rule whose stages the other CPU recorded
    only as a range of seconds (low, high): its ratio is the range's middle over the median of its stages here."""
    import statistics

    stages = {s: there[s] / here[s] for s in sorted(set(here) & set(there)) if here[s] >= 1.0}
    by_rule: dict[str, list[float]] = {}
    for stage, ratio in stages.items():
        by_rule.setdefault(rule_of(stage), []).append(ratio)
    rules = {rule: statistics.median(r) for rule, r in by_rule.items()}
    for rule, (low, high) in (rule_ranges or {}).items():
        mine = [seconds for stage, seconds in here.items() if rule_of(stage) == rule and seconds >= 1.0]
        if mine:
            rules[rule] = (low + high) / 2 / statistics.median(mine)
    if not rules:
        raise ValueError("no stage measured on both CPUs: pass two benchmark sets of the same workflow")
    return {"stages": stages, "rules": rules, "median": statistics.median([*stages.values(), *(
        rules[r] for r in (rule_ranges or {}) if r in rules)])}


def projected_seconds(seconds: dict[str, float], ratios: dict) -> dict[str, float]:
    """``seconds`` as the other CPU of ``ratios`` (``stage_ratios``) would take them: each stage times its own
    measured ratio, else its rule's, else the median."""
    def ratio(stage: str) -> float:
        return ratios["stages"].get(stage) or ratios["rules"].get(rule_of(stage)) or ratios["median"]

    return {stage: s * ratio(stage) for stage, s in seconds.items()}


def read_benchmarks(benchmark_dir: str | Path) -> dict[str, float]:
    """{job name: wall seconds} from Snakemake's benchmark TSVs (``s`` column, first row)."""
    out = {}
    for path in sorted(Path(benchmark_dir).glob("*.tsv")):
        with open(path, encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        if rows:
            out[path.stem] = float(rows[0]["s"])
    return out


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
