"""`snakemake -n` as a user types it (profiles, --configfile), reporting what Snakemake itself resolved: every rule of
the workflow with its script, every job with its resources and the sbatch line the SLURM plugin would build from them,
and a replay of Snakemake's own scheduler over the whole DAG.

Rules with a `message:` print no resources, so the dry-run runs Snakemake's CLI in this process with two of its
methods wrapped while it runs (``reporting``):
- per job (the dry-run executor's ``printjob``): its resources and, given the SLURM profile's partition file
  (``slurm_partitions``; a dry-run hands the jobs to its own executor, not the plugin), the plugin's own
  ``get_submit_command`` + ``set_gres_string`` with the partition its ``get_best_partition`` picks (never submitted);
- per rule: its name, its script's path, whether it is a local rule, its resources as the rule and the profile's
  defaults resolve them before any job (those that are not functions of the job);
- the replay: before the dry-run's own pass, Snakemake's ``JobScheduler`` selects jobs as it does in a real run
  (``job_selector`` against the global resources - ``--cores``, ``--resources`` and the profile's - and each job's
  ``scheduler_resources``; a dry-run's selector is the greedy one, a real run's the ILP one, both held to the same
  resource limits) and frees them (``_free_resources``) one at a time, oldest first, until the DAG is done; every
  set of jobs running together is recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

def name(job) -> str:
    return "-".join([job.rule.name, *map(str, job.wildcards_dict.values())])


def emit(kind: str, record: dict) -> None:
    print(kind + " " + json.dumps(record), file=sys.stderr)


def printjob(original):
    """The dry-run executor's ``printjob``, reporting each job's resources and, given the SLURM profile's partition
    file, the sbatch line the plugin would build."""
    def report(self, job):
        original(self, job)
        resources = {k: v for k, v in job.resources.items()  # not the values that wait for the inputs (TBDString)
                     if isinstance(v, (int, float, str)) and type(v).__name__ != "TBDString"}
        record = {"rule": job.rule.name, "job": name(job), "resources": resources}
        partitions = os.environ.get("DRY_RUN_SLURM_PARTITIONS")  # the profile's slurm-partition-config
        if partitions is not None:
            from snakemake_executor_plugin_slurm.partitions import get_best_partition, read_partition_file
            from snakemake_executor_plugin_slurm.submit_string import get_submit_command
            from snakemake_executor_plugin_slurm.utils import set_gres_string
            partition = job.resources.get("slurm_partition")
            if not partition:  # what is known before the job's inputs exist (a real run also knows the input sizes)
                known = type("Known", (), {"resources": resources, "threads": job.threads, "name": job.name})
                partition = get_best_partition(read_partition_file(Path(partitions)), known, self.logger)
            params = {"run_uuid": "dry-run", "slurm_logfile": "slurm.log", "comment_str": "rule_" + job.rule.name,
                      "account": "", "partition": f" -p {partition}" if partition else "", "workdir": "."}
            record.update(partition=partition, sbatch=get_submit_command(job, params) + set_gres_string(job))
        emit("JOB", record)

    return report


def replaying(original):
    """The scheduler's ``schedule``, replaying Snakemake's own job selection over the whole DAG first."""
    def replay(self):
        workflow = self.workflow
        for rule in workflow.rules:
            script = str(Path(rule.basedir.get_path_or_uri(secret_free=True)) / rule.script) if rule.script else None
            local = rule.name in workflow._localrules or rule.norun  # as on a cluster (a dry-run runs all locally)
            declared = {key: res.value for key, res in rule.resources.items()
                        if not res.is_evaluable() and not key.startswith("_")}
            emit("RULE", {"rule": rule.name, "script": script, "local": local, "resources": declared})
        dag = workflow.dag
        jobs = sorted(dag.needrun_jobs(), key=name)
        need, done, running, together = set(jobs), set(), [], []
        while len(done) < len(jobs):
            ready = [j for j in jobs if j not in done and j not in running
                     and all(d in done or d not in need for d in dag.dependencies[j])]
            running += list(self.job_selector(ready)) if ready else []
            if not running:
                raise RuntimeError("replay: no job can start")
            together.append([name(j) for j in running])
            finished = running.pop(0)
            self._free_resources(finished)
            done.add(finished)
        emit("REPLAY", {"limits": {k: v for k, v in self.global_resources.items() if not k.startswith("_job")},
                        "resources": {name(j): dict(j.scheduler_resources) for j in jobs}, "together": together})
        return original(self)

    return replay


@contextlib.contextmanager
def reporting():
    """While open, Snakemake's dry-run reports its jobs, rules and scheduler replay on stderr (``printjob``,
    ``replaying``)."""
    from snakemake.executors import dryrun
    from snakemake.scheduling.job_scheduler import JobScheduler

    saved = dryrun.Executor.printjob, JobScheduler.schedule
    dryrun.Executor.printjob, JobScheduler.schedule = printjob(saved[0]), replaying(saved[1])
    try:
        yield
    finally:
        dryrun.Executor.printjob, JobScheduler.schedule = saved


def install(workdir: Path) -> None:
    """Nothing left to install: the dry-run reports in this process (kept for the callers that prepare a folder)."""


def slurm_partitions(workdir: Path) -> dict:
    """The environment that hands the wrapper the SLURM profile's partition file (its ``slurm-partition-config``)."""
    import yaml

    profile = yaml.safe_load((workdir / "profiles/slurm/config.yaml").read_text(encoding="utf-8"))
    return {"DRY_RUN_SLURM_PARTITIONS": str(workdir / profile["slurm-partition-config"])}


def dry_run(workdir: Path, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """`snakemake -n ARGS` in this process (``workflow.snakemake_in_process``) while it reports (``reporting``);
    returns the completed call and {"jobs": {rule: [job records]}, "rules": {rule: record}, "replay": record or
    None}."""
    from workflow import snakemake_in_process

    with reporting():
        done = snakemake_in_process(workdir, "-n", *args, env={"HF_HUB_OFFLINE": "1", **(env or {})})
    seen: dict = {"jobs": {}, "rules": {}, "replay": None}
    for line in done.stderr.splitlines():
        kind, _, payload = line.partition(" ")
        if kind == "JOB":
            job = json.loads(payload)
            seen["jobs"].setdefault(job["rule"], []).append(job)
        elif kind == "RULE":
            rule = json.loads(payload)
            seen["rules"][rule["rule"]] = rule
        elif kind == "REPLAY":
            seen["replay"] = json.loads(payload)
    return done, seen


def fake_nvidia_smi(folder: Path, gpus: int) -> dict:
    """A folder with an ``nvidia-smi`` that lists ``gpus`` GPUs as the real one does (``-L``), and the environment
    that puts it first on the PATH: a machine that reports that many GPUs, to Snakemake and its profile."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(f'echo "GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)"\n'
                    for i in range(gpus))
    binary = folder / "nvidia-smi"
    binary.write_text("#!/bin/sh\n" + lines, encoding="utf-8")
    binary.chmod(0o755)
    # every listed GPU visible: not a CUDA_VISIBLE_DEVICES left in this process by a test that pinned a job to one
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}", "CUDA_VISIBLE_DEVICES": None}


def model_rules(rules: dict) -> set[str]:
    """The rules whose job runs torch on a model: their script runs inside ``with model_job(snakemake)``
    (thai_grpo.jobs.job: its own GPU or the CPU, torch's threads set to the rule's), which every model stage does and
    no other script does; local rules (downloads on a cluster's login node) excepted."""
    return {name for name, rule in rules.items() if rule["script"] and not rule["local"]
            and "with model_job(snakemake)" in Path(rule["script"]).read_text(encoding="utf-8")}
