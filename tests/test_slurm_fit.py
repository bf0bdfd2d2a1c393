"""thai_grpo.jobs.slurm_fit on hand-made partitions: what the SLURM plugin asks sbatch for, and the one-line refusal of
a job no node of its partition can hold (tests/test_pipeline.py runs it against a real one-node Slurm)."""

from __future__ import annotations

import pytest

from thai_grpo.jobs.slurm_fit import Node, Request, gres_gpus, partition_nodes, refusal, request

# A small cluster as `sinfo -h -N -o "%P %c %m %G"` lists it: two CPU nodes, a GPU node with 8 CPUs and 2 GPUs.
SINFO = """cpu* 2 16000 (null)
cpu* 4 32000 (null)
gpu 8 64000 gpu:a100:2(S:0-1)
"""
NODES, DEFAULT = partition_nodes(SINFO)
PROFILE = {"runtime": 30, "mem_mb_per_cpu": 4000, "cpus_per_gpu": 4}  # a GPU job: 4 CPUs, 16 GB


@pytest.mark.parametrize("gres, gpus", [("(null)", 0), ("gpu:1", 1), ("gpu:a100:4(S:0-1)", 4),
                                        ("gpu:2,shard:8", 2), ("shard:8,gpu:tesla:1", 1), ("gpu:1,gpu:v100:2", 3)])
def test_gres_counts_the_gpus_only(gres, gpus):
    assert gres_gpus(gres) == gpus


def test_sinfo_lists_each_partitions_nodes_and_its_default():
    assert DEFAULT == "cpu"
    assert NODES == {"cpu": [Node(2, 16000, 0), Node(4, 32000, 0)], "gpu": [Node(8, 64000, 2)]}


def test_request_is_what_the_plugin_asks_sbatch_for():
    assert request({**PROFILE, "gpu": 1}, threads=2) == Request(4, 16000, 1, "cpus_per_gpu", "mem_mb_per_cpu")
    assert request({**PROFILE, "gpu": 2}, threads=1) == Request(8, 32000, 2, "cpus_per_gpu", "mem_mb_per_cpu")
    assert request(PROFILE, threads=2) == Request(2, 8000, 0, "threads", "mem_mb_per_cpu")  # no GPU: its threads
    assert request({"cpus_per_task": 3, "gpu": 1, "cpus_per_gpu": 4, "mem_mb": 500}, threads=1) == \
        Request(3, 500, 1, "cpus_per_task", "mem_mb")
    assert request({"mem_mb": "TBD"}, threads=1) == Request(1, 0, 0, "threads", "")  # waits for the inputs: unknown


@pytest.mark.parametrize("partition, resources, threads", [
    ("gpu", {**PROFILE, "gpu": 1}, 1),
    ("gpu", {**PROFILE, "gpu": 2}, 1),  # 8 CPUs, 32 GB, 2 GPUs: exactly the GPU node
    ("cpu", PROFILE, 1),
    ("cpu", {**PROFILE, "mem_mb_per_cpu": 8000}, 4),  # 4 CPUs and 32 GB: only the larger CPU node, which is enough
])
def test_a_job_some_node_holds_is_let_through(partition, resources, threads):
    assert refusal("train", partition, request(resources, threads), NODES[partition]) is None


@pytest.mark.parametrize("partition, resources, threads, line", [
    ("gpu", {**PROFILE, "gpu": 1, "cpus_per_gpu": 16}, 1,
     'rule train can never start on partition gpu: it asks 16 CPUs per GPU (cpus_per_gpu), its largest node has 8 '
     'CPUs (`sinfo -o "%P %c"`); set cpus_per_gpu to at most 8 in profiles/slurm/config.yaml'),
    ("gpu", {**PROFILE, "gpu": 2, "cpus_per_gpu": 8}, 1,
     "rule train can never start on partition gpu: it asks 8 CPUs per GPU (cpus_per_gpu), its largest node has 8 "
     'CPUs (`sinfo -o "%P %c"`); set cpus_per_gpu to at most 4 in profiles/slurm/config.yaml'),
    ("gpu", {**PROFILE, "gpu": 3}, 1,
     'rule train can never start on partition gpu: it asks 3 GPU(s) (gpu), its largest node has 2 GPU(s) (`sinfo -o '
     '"%P %G"`); give partition gpu the max_gpu sinfo shows in profiles/slurm/partitions.yaml'),
    ("cpu", {**PROFILE, "gpu": 1}, 1,  # a GPU job sent to a partition without GPUs
     'rule train can never start on partition cpu: it asks 1 GPU(s) (gpu), its largest node has 0 GPU(s) (`sinfo -o '
     '"%P %G"`); give partition cpu the max_gpu sinfo shows in profiles/slurm/partitions.yaml'),
    ("gpu", {**PROFILE, "gpu": 1, "mem_mb_per_cpu": 20000}, 1,
     "rule train can never start on partition gpu: it asks 80000 MB (mem_mb_per_cpu x 4 CPUs), its largest node has "
     '64000 MB (`sinfo -o "%P %m"`); set mem_mb_per_cpu to at most 16000 in profiles/slurm/config.yaml'),
    ("cpu", {"mem_mb": 40000}, 1,
     "rule train can never start on partition cpu: it asks 40000 MB (mem_mb), its largest node has 32000 MB "
     '(`sinfo -o "%P %m"`); set mem_mb to at most 32000 in profiles/slurm/config.yaml'),
    ("cpu", {"cpus_per_task": 6}, 1,
     "rule train can never start on partition cpu: it asks 6 CPUs (cpus_per_task), its largest node has 4 CPUs "
     '(`sinfo -o "%P %c"`); set cpus_per_task to at most 4 in profiles/slurm/config.yaml'),
    ("cpu", {}, 6,
     "rule train can never start on partition cpu: it asks 6 CPUs (its threads), its largest node has 4 CPUs "
     '(`sinfo -o "%P %c"`); set max-threads: 4 in profiles/slurm/config.yaml'),
])
def test_a_job_no_node_holds_is_refused_in_one_line_naming_the_resource_and_the_fix(partition, resources, threads,
                                                                                     line):
    assert refusal("train", partition, request(resources, threads), NODES[partition]) == line


def test_a_partition_sinfo_does_not_list_is_refused():
    assert refusal("split", "short", request(PROFILE, 1), []) == (
        "rule split can never start on partition short: sinfo lists no node in it; name your partitions in "
        "profiles/slurm/partitions.yaml (`sinfo -s`)")


def test_a_job_each_resource_of_which_fits_some_node_but_not_one_node_is_refused():
    """Many CPUs on one node, much memory on another: 4 CPUs and 16 GB fit neither."""
    nodes = [Node(8, 8000, 0), Node(2, 64000, 0)]
    assert refusal("score", "mixed", request({"cpus_per_task": 4, "mem_mb_per_cpu": 4000}, 1), nodes) == (
        'rule score can never start on partition mixed: no node of it has 4 CPUs, 16000 MB and 0 GPU(s) together '
        '(`sinfo -N -o "%N %P %c %m %G"`); ask for less in profiles/slurm/config.yaml')
