"""Where a model job runs (thai_grpo.jobs.devices, thai_grpo.jobs.gpus): the config's `device` against what the job's
torch sees, the real config's one-line stop on a machine without CUDA (run through the model scripts themselves), and
one GPU per job on a machine with several (the slot locks, claimed by concurrent processes)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
from snakemake_dry_run import fake_nvidia_smi

from thai_grpo.jobs.devices import choose_job_device, start_model_job
from thai_grpo.jobs.gpus import claim_gpu_slot, pin_job_gpu, slot_device, visible_gpus
from thai_grpo.workflow import load_config_files

REPO = Path(__file__).resolve().parents[1]
REAL_CONFIG = [REPO / "config/config.yaml", REPO / "config/qwen3-0.6b.yaml"]
# Every script a model rule runs (tests/test_profiles.py derives the model rules from the workflow and checks that
# each of their scripts starts with start_model_job).
MODEL_SCRIPTS = ["build_base", "train_sft", "train", "sample_heldout", "preference_pairs", "train_reward_model",
                 "reward_model_accuracy", "token_logprobs"]


# ----------------------------------------------------------------------------------------- the decision
@pytest.mark.parametrize("setting, source, cuda, device", [
    ("auto", "hub", True, "cuda"), ("auto", "shipped", True, "cuda"), ("auto", "shipped", False, "cpu"),
    ("auto", "scratch", False, "cpu"), ("auto", "local", False, "cpu"), ("cuda", "hub", True, "cuda"),
    ("cpu", "hub", True, "cpu"), ("cpu", "hub", False, "cpu"), ("cpu", "shipped", True, "cpu"),
])
def test_the_job_device_follows_the_setting(setting, source, cuda, device):
    assert choose_job_device(setting, source, cuda, "2.13.0") == device


@pytest.mark.parametrize("setting, source, cuda_build, says", [
    ("auto", "hub", None, "torch 2.13.0+cpu, a CPU build): a hub base (the real model) needs one"),
    ("cuda", "shipped", None, "a CPU build): `device: cuda` needs one"),
    ("auto", "hub", "12.4", "torch 2.13.0+cpu, built for CUDA 12.4)"),
])
def test_a_gpu_config_without_cuda_stops_with_one_line(setting, source, cuda_build, says):
    with pytest.raises(RuntimeError) as stop:
        choose_job_device(setting, source, False, "2.13.0+cpu", cuda_build)
    line = str(stop.value)
    assert "\n" not in line and says in line
    assert line.startswith("this job's torch sees no CUDA GPU") and "set `device: cpu`" in line


def test_an_unknown_setting_is_refused():
    with pytest.raises(ValueError, match="use one of auto, cuda, cpu"):
        choose_job_device("gpu", "hub", True, "2.13.0")


# ----------------------------------------------------------------------------------------- the model scripts
RUN_SCRIPTS = r'''
import json, os, runpy, sys
from types import SimpleNamespace
config = json.loads(sys.argv[1])
outcome = {}
for name in sys.argv[2:]:
    log = os.path.join(os.environ["LOGS"], name + ".log")
    job = SimpleNamespace(config=config, log=[log], threads=1, input=SimpleNamespace(), output=SimpleNamespace(),
                          params=SimpleNamespace())
    stdout, stderr = sys.stdout, sys.stderr
    try:
        runpy.run_path(f"scripts/{name}.py", init_globals={"snakemake": job}, run_name="__main__")
        outcome[name] = "finished"
    except SystemExit as stop:
        outcome[name] = "stopped: " + str(stop.code)
    except Exception as error:  # past the device check: the fake job has no inputs
        outcome[name] = "went on: " + type(error).__name__
    sys.stdout, sys.stderr = stdout, stderr
    outcome[name] += " | CUDA_VISIBLE_DEVICES=" + repr(os.environ.get("CUDA_VISIBLE_DEVICES"))
print(json.dumps(outcome))
'''


def run_model_scripts(tmp_path: Path, config: dict, names: list[str]) -> dict:
    """Each script run as Snakemake runs it (a ``snakemake`` object with the config, the log and no inputs), in one
    fresh process on this CPU machine; what became of each."""
    import json

    env = {**os.environ, "PYTHONPATH": str(REPO), "LOGS": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run([sys.executable, "-c", RUN_SCRIPTS, json.dumps(config), *names], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine's torch sees a CUDA GPU")
def test_the_real_config_stops_every_model_script_before_its_model_and_device_cpu_runs_on(tmp_path):
    config = load_config_files(REAL_CONFIG)
    assert config["device"] == "auto" and config["base"]["source"] == "hub"
    stopped = run_model_scripts(tmp_path, config, MODEL_SCRIPTS)
    for name in MODEL_SCRIPTS:
        outcome = stopped[name]
        assert outcome.startswith("stopped: device: this job's torch sees no CUDA GPU (torch "), (name, outcome)
        assert "set `device: cpu`" in outcome and "\n" not in outcome, (name, outcome)
    went_on = run_model_scripts(tmp_path, {**config, "device": "cpu"}, ["sample_heldout", "train"])
    for name, outcome in went_on.items():  # past the check (then the fake job's missing inputs), every GPU hidden
        assert outcome.startswith("went on: ") and outcome.endswith("CUDA_VISIBLE_DEVICES=''"), (name, outcome)


def test_device_cpu_hides_every_gpu_before_torch_looks():
    environ = {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert start_model_job({"device": "cpu", "base": {"source": "hub"}}, environ) == "cpu"
    assert environ["CUDA_VISIBLE_DEVICES"] == "" and "PYTORCH_CUDA_ALLOC_CONF" not in environ


def test_a_job_that_may_use_a_gpu_gets_expandable_segments_unless_it_says_otherwise():
    environ = {"CUDA_VISIBLE_DEVICES": ""}
    assert start_model_job({"device": "auto", "base": {"source": "shipped"}}, environ) == "cpu"
    assert environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    environ = {"CUDA_VISIBLE_DEVICES": "", "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}
    start_model_job({"device": "auto", "base": {"source": "shipped"}}, environ)
    assert environ["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:512"  # the user's own setting is kept


def test_a_machine_without_nvidias_driver_never_imports_the_gpu_layer(tmp_path):
    """Where nvidia-smi is absent, a job's start and its capability run no GPU code; where it is present, the job is
    pinned through thai_grpo.jobs.gpus (here: the first of two GPUs a fake nvidia-smi lists)."""
    probe = ("import os, sys; from thai_grpo.jobs.devices import current_capability, start_model_job; "
             "device = start_model_job({'device': 'auto', 'base': {'source': 'shipped'}}); "
             "print(device, current_capability(), 'thai_grpo.jobs.gpus' in sys.modules, "
             "os.environ.get('CUDA_VISIBLE_DEVICES'))")
    bare = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    bare.pop("CUDA_VISIBLE_DEVICES", None)
    out = subprocess.run([sys.executable, "-c", probe], env=bare, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.split() == ["cpu", "None", "False", "None"], out.stderr[-2000:]
    two = {**bare, "PATH": fake_nvidia_smi(tmp_path / "bin", gpus=2)["PATH"] + os.pathsep + bare["PATH"]}
    out = subprocess.run([sys.executable, "-c", probe], env=two, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.split()[2:] == ["True", "0"], out.stderr[-2000:]


# ----------------------------------------------------------------------------------------- one GPU per job
def test_the_gpus_a_job_may_use(tmp_path):
    path = fake_nvidia_smi(tmp_path / "bin", gpus=4)["PATH"]
    assert visible_gpus({"PATH": path}) == ["0", "1", "2", "3"]
    assert visible_gpus({"PATH": path, "CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert visible_gpus({"PATH": path, "CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert visible_gpus({"PATH": str(tmp_path / "nowhere")}) == []
    assert [slot_device(slot, ["2", "3"]) for slot in range(4)] == ["2", "3", "2", "3"]  # gpu=4 on 2 GPUs: 2 each


def claim_and_wait(folder: str, path: str, claimed, release: str) -> None:
    """A job: pin itself to a GPU (fake nvidia-smi on ``path``), report it, hold it until ``release`` exists."""
    import time

    environ = {"PATH": path}
    pin_job_gpu(environ, folder)
    claimed.put((os.getpid(), environ["CUDA_VISIBLE_DEVICES"]))
    deadline = time.monotonic() + 60
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.parametrize("gpus", [2, 4])
def test_concurrent_jobs_get_distinct_gpus_and_a_finished_one_frees_its_own(tmp_path, gpus):
    path = fake_nvidia_smi(tmp_path / "bin", gpus=gpus)["PATH"]
    folder, release = str(tmp_path / "slots"), str(tmp_path / "release")
    context = multiprocessing.get_context("spawn")
    claimed = context.Queue()

    def job():
        return context.Process(target=claim_and_wait, args=(folder, path, claimed, release))

    jobs = [job() for _ in range(gpus)]
    for started in jobs:
        started.start()
    devices = dict(claimed.get(timeout=120) for _ in jobs)  # pid -> its GPU
    assert sorted(devices.values()) == [str(i) for i in range(gpus)]  # all at once, each its own GPU
    first = next(started for started in jobs if devices[started.pid] == "0")
    first.kill()  # a crash: the kernel releases its lock
    first.join(30)
    successor = job()
    successor.start()
    assert claimed.get(timeout=120) == (successor.pid, "0")  # the freed GPU, not a busy one
    Path(release).touch()
    for ended in [*jobs, successor]:
        ended.join(30)
    slot, handle = claim_gpu_slot(folder)  # every job ended: the lowest slot is free again
    assert slot == 0
    handle.close()


def test_one_visible_gpu_is_used_as_it_is_without_a_lock(tmp_path):
    path = fake_nvidia_smi(tmp_path / "bin", gpus=1)["PATH"]
    environ = {"PATH": path, "CUDA_VISIBLE_DEVICES": "GPU-slurm"}  # a SLURM job: sbatch gave it one GPU
    assert pin_job_gpu(environ, tmp_path / "slots") is None and environ["CUDA_VISIBLE_DEVICES"] == "GPU-slurm"
    assert not (tmp_path / "slots").exists()
