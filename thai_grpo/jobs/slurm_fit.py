"""Whether a job can ever start on a SLURM cluster: what snakemake-executor-plugin-slurm asks sbatch for against the
nodes of its partition (``sinfo``), so the workflow refuses it naming the resource, not Slurm pending it for good."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# `sinfo -h -N -o SINFO_FORMAT`: one line per node and partition (a default partition's name ends with "*")
SINFO_FORMAT = "%P %c %m %G"
PROFILE = "profiles/slurm/config.yaml"
PARTITIONS = "profiles/slurm/partitions.yaml"


@dataclass(frozen=True)
class Node:
    cpus: int
    mem_mb: int
    gpus: int


@dataclass(frozen=True)
class Request:
    """What sbatch is asked for, and the resource each number comes from (to name it in a refusal)."""

    cpus: int
    mem_mb: int
    gpus: int
    cpus_from: str  # cpus_per_task, cpus_per_gpu or threads
    mem_from: str  # mem_mb_per_cpu, mem_mb or "" (no memory asked)


def gres_gpus(gres: str) -> int:
    """GPUs in a node's ``%G`` (``gpu:1``, ``gpu:a100:4(S:0-1)``, ``gpu:2,shard:8``, ``(null)``)."""
    return sum(int(count) for count in re.findall(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)", gres))


def partition_nodes(sinfo: str) -> tuple[dict[str, list[Node]], str | None]:
    """({partition: its nodes}, the default partition or None) from ``sinfo -h -N -o SINFO_FORMAT``."""
    partitions: dict[str, list[Node]] = {}
    default = None
    for line in sinfo.splitlines():
        if not line.strip():
            continue
        name, cpus, mem_mb, gres = line.split()
        if name.endswith("*"):
            name = default = name[:-1]
        partitions.setdefault(name, []).append(Node(int(cpus), int(mem_mb.rstrip("+")), gres_gpus(gres)))
    return partitions, default


def _count(value) -> int:
    """A resource as a number; 0 for one not set or not known before the job's inputs exist."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def request(resources: Mapping, threads: int) -> Request:
    """What the plugin asks sbatch for (its ``get_submit_command``): ``--cpus-per-task`` when set, else
    ``--cpus-per-gpu`` for a GPU job, else the job's threads; ``--mem-per-cpu`` before ``--mem``; ``--gpus``."""
    gpus = _count(resources.get("gpu"))
    if _count(resources.get("cpus_per_task")):
        cpus, cpus_from = _count(resources["cpus_per_task"]), "cpus_per_task"
    elif gpus and _count(resources.get("cpus_per_gpu")):
        cpus, cpus_from = gpus * _count(resources["cpus_per_gpu"]), "cpus_per_gpu"
    else:
        cpus, cpus_from = max(1, threads), "threads"
    if _count(resources.get("mem_mb_per_cpu")):
        mem_mb, mem_from = cpus * _count(resources["mem_mb_per_cpu"]), "mem_mb_per_cpu"
    else:
        mem_mb, mem_from = _count(resources.get("mem_mb")), "mem_mb" if _count(resources.get("mem_mb")) else ""
    return Request(cpus, mem_mb, gpus, cpus_from, mem_from)


def refusal(rule: str, partition: str, asked: Request, nodes: list[Node]) -> str | None:
    """None when a node of ``partition`` holds the whole request; else one line: the resource it exceeds and the fix."""
    if any(asked.cpus <= n.cpus and asked.mem_mb <= n.mem_mb and asked.gpus <= n.gpus for n in nodes):
        return None
    where = f"rule {rule} can never start on partition {partition}"
    if not nodes:
        return f"{where}: sinfo lists no node in it; name your partitions in {PARTITIONS} (`sinfo -s`)"
    most = Node(*(max(getattr(n, key) for n in nodes) for key in ("cpus", "mem_mb", "gpus")))
    if asked.gpus > most.gpus:
        asks, has = f"{asked.gpus} GPU(s) (gpu)", f'{most.gpus} GPU(s) (`sinfo -o "%P %G"`)'
        fix = f"give partition {partition} the max_gpu sinfo shows in {PARTITIONS}"
    elif asked.cpus > most.cpus:
        has = f'{most.cpus} CPUs (`sinfo -o "%P %c"`)'
        if asked.cpus_from == "cpus_per_gpu":
            asks = f"{asked.cpus // asked.gpus} CPUs per GPU (cpus_per_gpu)"
            fix = f"set cpus_per_gpu to at most {most.cpus // asked.gpus} in {PROFILE}"
        elif asked.cpus_from == "cpus_per_task":
            asks, fix = f"{asked.cpus} CPUs (cpus_per_task)", f"set cpus_per_task to at most {most.cpus} in {PROFILE}"
        else:
            asks, fix = f"{asked.cpus} CPUs (its threads)", f"set max-threads: {most.cpus} in {PROFILE}"
    elif asked.mem_mb > most.mem_mb:
        has = f'{most.mem_mb} MB (`sinfo -o "%P %m"`)'
        if asked.mem_from == "mem_mb_per_cpu":
            asks = f"{asked.mem_mb} MB (mem_mb_per_cpu x {asked.cpus} CPUs)"
            fix = f"set mem_mb_per_cpu to at most {most.mem_mb // asked.cpus} in {PROFILE}"
        else:
            asks, fix = f"{asked.mem_mb} MB (mem_mb)", f"set mem_mb to at most {most.mem_mb} in {PROFILE}"
    else:
        return (f"{where}: no node of it has {asked.cpus} CPUs, {asked.mem_mb} MB and {asked.gpus} GPU(s) together "
                f'(`sinfo -N -o "%N %P %c %m %G"`); ask for less in {PROFILE}')
    return f"{where}: it asks {asks}, its largest node has {has}; {fix}"
