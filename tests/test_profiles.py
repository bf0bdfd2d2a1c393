"""Dry-runs of the real config with the default and the SLURM profiles, in a scratch copy of the workflow.

A dry-run with `--executor slurm` needs no sbatch: Snakemake validates the plugin's settings, then hands the
jobs to its dry-run executor. Rules with a `message:` print no resources, so each dry-run goes through a small
wrapper that also prints, per job, its resources and the sbatch command line the plugin would build from them
(the plugin's own `get_submit_command` + `set_gres_string`, never run).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow import copy_workflow

REPO = Path(__file__).resolve().parents[1]
GPU_RULES = {"base_model", "sft_adapter", "train", "preference_pairs", "reward_model", "sample", "sample_extra"}
# The second held-out set's rules run only where eval.extra_sets names one: the real config (MGSM Thai).
EXTRA_SET_RULES = {"extra_heldout", "sample_extra", "score_extra"}
# preference_pairs runs only when DPO or PPO is evaluated, reward_model only when a PPO variant scores with it
ALWAYS_SCHEDULED = GPU_RULES - {"preference_pairs", "reward_model"} - EXTRA_SET_RULES
CPU_RULES = {"dataset", "split", "score", "results", "figures", "report", "extra_heldout", "score_extra"}
ALWAYS_SCHEDULED_CPU = CPU_RULES - EXTRA_SET_RULES

WRAPPER = r'''
import json, sys
from snakemake.executors import dryrun

_printjob = dryrun.Executor.printjob

def printjob(self, job):
    _printjob(self, job)
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string
    resources = {k: v for k, v in job.resources.items() if isinstance(v, (int, float, str))}
    partition = job.resources.get("slurm_partition")
    params = {"run_uuid": "dry-run", "slurm_logfile": "slurm.log", "comment_str": "rule_" + job.rule.name,
              "account": "", "partition": f" -p {partition}" if partition else "", "workdir": "."}
    sbatch = get_submit_command(job, params) + set_gres_string(job)
    print("JOB " + json.dumps({"rule": job.rule.name, "resources": resources, "sbatch": sbatch}), file=sys.stderr)

dryrun.Executor.printjob = printjob
from snakemake.cli import main
main(sys.argv[1:])
'''


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    target = copy_workflow(tmp_path_factory.mktemp("profiles"))
    (target / "dry_run_jobs.py").write_text(WRAPPER)
    return target


def dry_run(workdir: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict[str, list[dict]]]:
    """`snakemake -n ARGS` through the wrapper; the jobs it prints, grouped by rule."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "dry_run_jobs.py", "-n", *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=300)
    jobs: dict[str, list[dict]] = {}
    for line in done.stderr.splitlines():
        if line.startswith("JOB "):
            job = json.loads(line[4:])
            jobs.setdefault(job["rule"], []).append(job)
    return done, jobs


def test_real_config_dry_run_with_the_default_profile(workdir):
    done, jobs = dry_run(workdir, "--configfile", "config/qwen3-0.6b.yaml")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "workflow specific profile profiles/default" in done.stderr
    assert ALWAYS_SCHEDULED | ALWAYS_SCHEDULED_CPU | EXTRA_SET_RULES <= set(jobs)
    real_models = yaml.safe_load((workdir / "config/qwen3-0.6b.yaml").read_text(encoding="utf-8"))["eval"]["models"]
    assert len(jobs["extra_heldout"]) == 1
    assert len(jobs["sample_extra"]) == len(jobs["score_extra"]) == len(real_models)  # every model of the comparison
    for rule, rule_jobs in jobs.items():
        for job in rule_jobs:  # local runs: no cluster resources; a model stage may declare gpu=1 for --resources
            assert "slurm_partition" not in job["resources"] and "gres" not in job["resources"], rule
            if rule in GPU_RULES:
                assert job["resources"].get("gpu", 1) == 1, rule
            else:
                assert "gpu" not in job["resources"], rule


SLURM_INVOCATIONS = {
    "workflow-profile": ["--workflow-profile", "profiles/slurm"],
    "profile": ["--profile", "profiles/slurm"],
    "profile-only": ["--profile", "profiles/slurm", "--workflow-profile", "none"],
}


@pytest.mark.parametrize("invocation", SLURM_INVOCATIONS)
@pytest.mark.parametrize("configfile", ["config/qwen3-0.6b.yaml", "config/config.yaml"])
def test_slurm_profile_dry_run_requests_gpus_only_for_model_stages(workdir, invocation, configfile):
    done, jobs = dry_run(workdir, *SLURM_INVOCATIONS[invocation], "--configfile", configfile)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "profiles/slurm" in done.stderr  # the profile was read
    assert ALWAYS_SCHEDULED | ALWAYS_SCHEDULED_CPU <= set(jobs)
    assert EXTRA_SET_RULES & set(jobs) == (EXTRA_SET_RULES if configfile == "config/qwen3-0.6b.yaml" else set())
    for rule in GPU_RULES:
        for job in jobs.get(rule, []):
            assert job["resources"]["gpu"] == 1, rule
            assert job["resources"]["mem_mb"] >= 16000, rule
            assert re.search(r"--gpus=1\b", job["sbatch"]), job["sbatch"]
            assert "--cpus-per-task=4" in job["sbatch"] and " -p gpu " in job["sbatch"] + " ", job["sbatch"]
    for rule in CPU_RULES:
        for job in jobs.get(rule, []):
            assert "gpu" not in job["resources"] and "gres" not in job["resources"], rule
            assert "--gpus" not in job["sbatch"] and "--gres" not in job["sbatch"], job["sbatch"]
            assert " -p cpu " in job["sbatch"] and "--cpus-per-task=1" in job["sbatch"], job["sbatch"]


def test_slurm_profile_names_only_existing_rules():
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    rules = set()
    for path in (REPO / "rules").glob("*.smk"):
        rules |= set(re.findall(r"^\s*rule (\w+):", path.read_text(), flags=re.M))
        rules |= set(re.findall(r"^use rule \w+ as (\w+) with:", path.read_text(), flags=re.M))
    assert set(profile["set-resources"]) == GPU_RULES
    assert GPU_RULES | CPU_RULES <= rules
    assert profile["executor"] == "slurm"
    assert "gpu" not in profile["default-resources"] and "gres" not in profile["default-resources"]


def test_slurm_profile_entries_are_commented():
    """Every top-level entry and every default resource carries a comment saying what it does."""
    lines = (REPO / "profiles/slurm/config.yaml").read_text().splitlines()
    section = None
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            section = line.split(":")[0]
            assert "#" in line, line
        elif section == "default-resources":
            assert "#" in line, line
