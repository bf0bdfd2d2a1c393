"""Dry-runs with the default and the SLURM profiles, in a scratch copy of the workflow (tests/snakemake_dry_run.py:
what Snakemake resolved per rule and per job, the sbatch line the SLURM plugin would build, and a replay of Snakemake's
own scheduler over the DAG).

- On a machine that reports N GPUs (an ``nvidia-smi`` that lists 1, 2 or 4), the default profile limits ``gpu`` to N
  and the real config's DAG runs up to N model jobs together, N of them at some point; on a CPU-only machine there is
  no limit and the offline default keeps running its 1-thread model jobs side by side.
- Every rule that loads a model (derived from the workflow: its script runs inside ``model_job``) declares one GPU and
  starts with ``with model_job(snakemake)`` (its GPU, or the CPU, or the one-line stop), and
  under the SLURM profile every job of such a rule, the chain study's renamed copies included, gets ``--gpus=1`` on
  a GPU partition; every other job gets no GPU and a CPU partition.
A dry-run with `--executor slurm` needs no sbatch: Snakemake validates the plugin's settings, then hands the jobs to
its dry-run executor.
"""

from __future__ import annotations

import ast

import re
from pathlib import Path

import pytest
import yaml
from snakemake_dry_run import dry_run, fake_nvidia_smi, install, model_rules, slurm_partitions
from workflow import copy_workflow

REPO = Path(__file__).resolve().parents[1]
REAL = ("--configfile", "config/qwen3-0.6b.yaml")
# Every target of the workflow (the Snakefile's rules): together they reach every rule that has jobs.
EVERY_TARGET = ("all", "pitfalls", "passk", "seeds", "hacking", "chains", "losses", "base")
# The model rules the workflow had when this test was written: the derivation must find at least these.
KNOWN_MODEL_RULES = {"train", "sample", "sample_extra", "sample_own_temperature", "sample_passk", "token_logprobs",
                     "preference_pairs", "reward_model", "reward_model_accuracy", "sft_adapter_brief",
                     "chain_seed1_train", "chain_seed2_sample", "chain_seed1_base_model", "chain_seed2_sft_adapter"}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    target = copy_workflow(tmp_path_factory.mktemp("profiles"))
    install(target)
    return target


def gpu_jobs_ever_together(replay: dict) -> int:
    gpu = {job for job, resources in replay["resources"].items() if resources.get("gpu", 0) > 0}
    return max(sum(job in gpu for job in running) for running in replay["together"])


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_n_gpus_reported_n_model_jobs_side_by_side(workdir, tmp_path, gpus):
    """The profile's limit is one model job per GPU: never more than N at once, and N of them together when the DAG
    has that many ready (the real config's samplers and trainers do); each claims its own GPU as it starts
    (tests/test_job_device.py)."""
    done, seen = dry_run(workdir, "--cores", "8", *REAL, env=fake_nvidia_smi(tmp_path / "bin", gpus=gpus))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "workflow specific profile profiles/default" in done.stderr
    replay = seen["replay"]
    assert replay["limits"]["gpu"] == gpus  # the profile's limit, as Snakemake resolved it
    gpu = {job for job, resources in replay["resources"].items() if resources.get("gpu") == 1}
    assert {"train-grpo", "train-ppo", "sample-base", "token_logprobs", "reward_model_accuracy"} <= gpu
    assert gpu_jobs_ever_together(replay) == gpus
    assert max(map(len, replay["together"])) > gpus  # CPU stages still run beside the model stages
    models = yaml.safe_load((REPO / "config/qwen3-0.6b.yaml").read_text(encoding="utf-8"))["eval"]["models"]
    for rule in ("sample", "sample_extra", "score_extra"):  # the whole comparison, on both held-out sets
        assert sum(job.startswith(f"{rule}-") for job in replay["resources"]) == len(models), rule


def test_the_command_line_overrides_the_profiles_limit(workdir, tmp_path):
    done, seen = dry_run(workdir, "--cores", "4", "--resources", "gpu=1", *REAL,
                         env=fake_nvidia_smi(tmp_path / "bin", gpus=2))
    assert done.returncode == 0, done.stderr[-3000:]
    assert seen["replay"]["limits"]["gpu"] == 1 and gpu_jobs_ever_together(seen["replay"]) == 1


@pytest.mark.parametrize("configfile", ["config/config.yaml", "config/qwen3-0.6b.yaml"])
def test_without_a_gpu_model_jobs_run_side_by_side(workdir, tmp_path, configfile):
    """No GPU reported (an nvidia-smi that lists none): no gpu limit, 1-thread model jobs together on 4 cores."""
    done, seen = dry_run(workdir, "--cores", "4", "--configfile", configfile,
                         env=fake_nvidia_smi(tmp_path / "bin", gpus=0))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gpu" not in seen["replay"]["limits"]
    assert gpu_jobs_ever_together(seen["replay"]) >= 2


def test_every_model_rule_declares_one_gpu_and_no_other_rule_does(workdir):
    done, seen = dry_run(workdir, *EVERY_TARGET)
    assert done.returncode == 0, done.stderr[-3000:]
    models = model_rules(seen["rules"])
    assert KNOWN_MODEL_RULES <= models, KNOWN_MODEL_RULES - models
    for name, rule in seen["rules"].items():
        assert rule["resources"].get("gpu", 0) == (1 if name in models else 0), name
        if name in models:  # its first statement: its log, its own GPU or the CPU or the one-line stop, its threads
            tree = ast.parse(Path(rule["script"]).read_text(encoding="utf-8"))
            first = next(node for node in tree.body[1:] if not isinstance(node, (ast.Import, ast.ImportFrom)))
            assert isinstance(first, ast.With) and ast.unparse(first.items[0].context_expr) == \
                "model_job(snakemake)", rule["script"]
        assert "slurm_partition" not in rule["resources"] and "gres" not in rule["resources"], name


@pytest.mark.parametrize("targets", [REAL, EVERY_TARGET], ids=["real-config", "every-target"])
def test_slurm_gives_every_model_job_a_gpu(workdir, targets):
    done, seen = dry_run(workdir, "--workflow-profile", "profiles/slurm", *targets, env=slurm_partitions(workdir))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "profiles/slurm" in done.stderr  # the profile was read
    models = model_rules(seen["rules"])
    assert models & set(seen["jobs"]) >= {"train", "sample", "token_logprobs"}
    if targets == EVERY_TARGET:
        assert {"chain_seed1_train", "sample_passk", "sample_own_temperature"} <= set(seen["jobs"])
    for rule, jobs in seen["jobs"].items():
        for job in jobs:
            sbatch = job["sbatch"] + " "
            if rule in models:
                assert re.search(r"--gpus=1\b", sbatch) and job["partition"] == "gpu", (rule, sbatch)
                assert "--cpus-per-gpu=4" in sbatch and "--mem-per-cpu 8000" in sbatch, sbatch
                assert job["resources"]["runtime"] >= 30, rule
            else:
                assert "--gpus" not in sbatch and "--gres" not in sbatch and job["partition"] == "cpu", (rule, sbatch)
                assert "--cpus-per-task=1" in sbatch, sbatch


def test_slurm_profile_names_no_rule():
    """The profile maps the rules' own needs onto the cluster: nothing in it is keyed by a rule name, so no rule
    (a chain's renamed copy, a new stage) can be left out."""
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    assert profile["executor"] == "slurm" and "set-resources" not in profile
    assert "gpu" not in profile["default-resources"] and "gres" not in profile["default-resources"]
    partitions = yaml.safe_load((REPO / profile["slurm-partition-config"]).read_text())["partitions"]
    assert [p["max_gpu"] > 0 for p in partitions.values()] == [False, True]


@pytest.mark.parametrize("path", ["profiles/slurm/config.yaml", "profiles/default/config.yaml"])
def test_profile_entries_are_commented(path):
    """Every top-level entry and every default resource carries a comment saying what it does."""
    section = None
    for line in (REPO / path).read_text().splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "-")) or line.startswith("__"):
            continue
        if not line.startswith(" "):
            section = line.split(":")[0]
            assert "#" in line, line
        elif section == "default-resources":
            assert "#" in line, line
