"""The whole DAG on config/smoke.yaml in a scratch copy of the workflow: outputs, caching, reruns, seeds, the
five methods (GRPO, Dr.GRPO, RLOO, DPO, PPO with its reward model) trained from the same SFT adapter side by side, and a second held-out set
added to the finished run (what it schedules); a copy of it with GRPO killed mid-training and resumed; two of its jobs
run again through profiles/slurm on a one-node Slurm (tests/slurm_cluster.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurm_cluster
from workflow import REPO, copy_workflow, scheduled_jobs, snakemake_call, write_extra_set_config
from workflow import run_snakemake as snakemake

from thai_grpo.jobs.machine import this_machine

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("smoke"))
    done = snakemake(workdir, "--configfile", "config/smoke.yaml")
    assert done.returncode == 0, done.stderr[-4000:]
    return workdir


def test_smoke_run_writes_results_and_report(smoke_run):
    results = json.loads((smoke_run / "results/results.json").read_text())
    steps = results["train"]["steps"]
    assert [s["step"] for s in steps] == [1, 2, 3]
    for key in ["reward_mean", "frac_groups_nonzero_std", "completion_length_mean", "accuracy", "kl",
                "empty_think_share"]:
        assert all(key in s for s in steps), key
    for model in ["sft", "grpo", "dr_grpo", "rloo", "dpo"]:
        for k in ["pass@1", "pass@4"]:
            metric = results["eval"][model][k]
            assert metric["wilson_low"] <= metric["estimate"] <= metric["wilson_high"]
    sizes = results["run"]["sizes"]  # what each sampling job ran with: the config's number, on a CPU
    assert set(sizes["eval.batch_size"]) == set(results["eval"])
    assert set(sizes["eval.batch_size"].values()) == {results["config"]["eval"]["batch_size"]}
    assert sizes["preference_pairs.batch_size"] == results["config"]["eval"]["batch_size"]
    html = (smoke_run / "results/report.html").read_text()
    assert "<html" in html and "pass@1" in html
    headline = json.loads((smoke_run / "results/headline.json").read_text())  # the same numbers as results.json
    assert headline["models"]["grpo"]["pass@1"] == results["eval"]["grpo"]["pass@1"]["estimate"]
    for stage in ["dataset", "split", "base_model", "sft_adapter", "train-grpo", "sample-grpo", "train-rloo",
                  "train-dpo", "preference_pairs", "sample-dpo"]:
        assert (smoke_run / f"results/benchmarks/{stage}.tsv").exists(), stage
    # every timed job's log names this machine; the scratch copy is no git checkout, so no commit
    assert results["run"]["jobs_ran_on"] == [{"cpu": this_machine()["cpu"], "commit": "unknown",
                                              "jobs": len(results["run"]["benchmarks"])}]
    # every training record counts its updates (none lost in float32), and the run card gathers them
    records = [*(smoke_run / "results/runs").glob("*/train.json"), smoke_run / "results/model/reward_model.json"]
    for path in records:
        record = json.loads(path.read_text())
        assert (record["optimizer_steps_skipped"], record["nonfinite_grad_steps"]) == (0, 0), path
    assert set(results["run"]["updates"]) == {f"train-{p.parent.name}" for p in records[:-1]} | {"reward_model"}
    # every GRPO-family and PPO run keeps its rollouts: each completion with its problem, rewards and advantage
    for run in ("grpo", "dr_grpo", "rloo", "ppo"):
        rollouts = [json.loads(line) for line in (smoke_run / f"results/runs/{run}/rollouts.jsonl").open()]
        assert rollouts and {"step", "prompt_id", "completion", "rewards", "advantage"} <= set(rollouts[0]), run
    assert (smoke_run / "results/runs/dpo/rollouts.jsonl").read_text() == ""  # DPO samples none while training


def test_smoke_run_holds_out_unseen_skeletons_and_tests_every_pair(smoke_run):
    def rows(name):
        return [json.loads(line) for line in (smoke_run / f"results/data/{name}.jsonl").read_text().splitlines()]

    heldout = {row["skeleton"] for row in rows("heldout")}
    assert len(heldout) == len(rows("heldout"))
    for name in ("train", "sft", "pretrain"):
        assert not heldout & {row["skeleton"] for row in rows(name)}, name
    results = json.loads((smoke_run / "results/results.json").read_text())
    assert results["run"]["data"]["leakage_check"] == "text hash and skeleton"
    assert results["run"]["data"]["reserved_for_heldout_skeletons"] > 0
    models = list(results["eval"])
    pairwise = results["comparison"]["pairwise"]
    assert len(pairwise) == 2 * len(models) * (len(models) - 1) // 2  # every pair, pass@1 and greedy
    assert all(t["n_resamples"] == results["config"]["eval"]["bootstrap_samples"] for t in pairwise)


def test_smoke_run_trains_the_four_methods_side_by_side(smoke_run):
    results = json.loads((smoke_run / "results/results.json").read_text())
    runs = results["runs"]
    assert {name: run["method"] for name, run in runs.items()} == {"grpo": "grpo", "dr_grpo": "grpo",
                                                                    "rloo": "rloo", "dpo": "dpo", "ppo": "ppo"}
    dr_grpo = runs["dr_grpo"]["settings"]
    assert dr_grpo["loss_type"] == "dr_grpo" and dr_grpo["scale_rewards"] == "none"
    for name in ["dr_grpo", "rloo"]:  # smoke: 2 steps each, with the same per-step metrics as GRPO
        assert [s["step"] for s in runs[name]["steps"]] == [1, 2], name
        assert all("frac_groups_nonzero_std" in s and "empty_think_share" in s for s in runs[name]["steps"]), name
    pairs = json.loads((smoke_run / "results/data/preference_pairs_stats.json").read_text())
    lines = (smoke_run / "results/data/preference_pairs.jsonl").read_text().splitlines()
    assert len(lines) == pairs["pairs"] and pairs["problems"] == 8 and pairs["samples_per_problem"] == 4
    assert pairs["pairs"] + pairs["all_right"] + pairs["all_wrong"] == pairs["problems"]
    assert all({"prompt_ids", "chosen_ids", "rejected_ids"} <= set(json.loads(line)) for line in lines)  # DPO's
    if pairs["pairs"]:  # DPO trained on them and logged TRL's numbers per step
        assert all("reward_margin" in s and "reward_accuracy" in s for s in runs["dpo"]["steps"])
    else:  # the smoke SFT model solves nothing: nothing to rank, and the run says so instead of failing
        assert runs["dpo"]["steps"] == [] and "no preference pairs" in runs["dpo"]["skipped"]
    rows = {row["method"]: row for row in results["comparison"]["methods"]}
    for method in ["DPO", "GRPO", "Dr.GRPO", "RLOO"]:
        row = rows[method]
        assert row["run"] and row["trainable_parameters"] > 0 and row["train_seconds"] > 0, method
        assert row["generated_tokens"] > 0 and row["human_labels"] and row["models_in_memory"], method
        assert row["paired_vs_sft"] == results["comparison"]["paired_tests"][f"{row['model']}_vs_sft"], method
    assert rows["SFT"]["paired_vs_sft"] is None
    ppo = rows["PPO"]  # policy + value trained, the reward model's own training counted apart, its time included
    assert ppo["run"] and ppo["trainable_parameters"] == sum(ppo["trainable_detail"].values())
    assert ppo["reward_model_trainable"] > 0 and ppo["train_seconds"] >= ppo["reward_model_seconds"] > 0
    assert ppo["peak_memory_mb"] > 0 and ppo["models_in_memory"].startswith("4 ")
    assert [s["step"] for s in runs["ppo"]["steps"]] == [1, 2]
    assert all(key in runs["ppo"]["steps"][0] for key in ("value_loss", "explained_variance", "clip_ratio", "kl"))
    assert results["reward_model"]["labels"].startswith("ranked by the verifier")
    assert all(row["peak_memory_mb"] > 0 for row in rows.values() if row["run"] and row["model"] != "base")
    html = (smoke_run / "results/report.html").read_text()
    for text in ['pass@1 vs SFT <span class="ci">(paired, the plan\'s verdict)</span>', "DPO can only rank answers that exist in the file", "9. Pitfalls",
                 "pitfall variants: not run", "Dr.GRPO", "RLOO", "by the verifier, not by people",
                 "PPO beside GRPO"]:
        assert text in html, text


def test_second_run_has_nothing_to_do(smoke_run):
    again = snakemake(smoke_run, "--configfile", "config/smoke.yaml", "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_snakemakes_own_report_holds_the_figures_and_the_report(smoke_run):
    """`snakemake --report` (README): Snakemake's self-contained report of the finished run, with the rules' captions."""
    done = snakemake(smoke_run, "--configfile", "config/smoke.yaml", "--report", "results/snakemake-report.html")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    html = (smoke_run / "results/snakemake-report.html").read_text(encoding="utf-8")
    assert "report.html" in html and "training_curves" in html


def test_changing_grpo_reruns_grpo_and_downstream_only(smoke_run):
    dry = snakemake(smoke_run, "--configfile", "config/smoke.yaml", "-n", "--config", 'grpo={"beta":0.05}')
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0, out[-3000:]
    job_table = out.split("Job stats:")[1].split("Reasons:")[0]
    scheduled = {line.split()[0] for line in job_table.splitlines()[3:] if line.split()}
    assert {"train", "sample", "score", "results", "report"} <= scheduled
    assert not scheduled & {"dataset", "split", "base_model", "sft_adapter"}


def weights(folder) -> dict:
    """{relative path: bytes} of the safetensors files under ``folder`` (the JSON files beside them name paths)."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*.safetensors"))}


def test_same_config_builds_the_same_base_and_sft_adapter(smoke_run, tmp_path):
    """The base model and SFT adapter rebuilt from scratch in a fresh copy equal the smoke run's, byte for byte. What
    is trained from the same pair gives the same numbers too: the shipped-pair test below (base, SFT and GRPO's
    scores), the resume tests (GRPO, PPO: an interrupted run ends where an uninterrupted one does) and the DPO and
    RLOO training test (tests/test_variants.py)."""
    second = copy_workflow(tmp_path)
    done = snakemake(second, "results/model/sft_adapter", "--configfile", "config/smoke.yaml")
    assert done.returncode == 0, done.stderr[-4000:]
    for model in ["base", "sft_adapter"]:
        first, again = weights(smoke_run / "results/model" / model), weights(second / "results/model" / model)
        assert first and first == again, model


# --------------------------------------------------------------------------- the SLURM profile on a real Slurm
# A model job (gpu=1) and a CPU job, their outputs removed from a copy of the finished smoke run, and the partition and
# comment (its rule and wildcards) the SLURM plugin gives each.
SLURM_SLICE = {"results/eval/base/samples.jsonl": ("rule_sample_wildcards_base", "gpu"),
               "results/eval/sft/scores.json": ("rule_score_wildcards_sft", "cpu")}
REFUSED = ('slurm: rule sample can never start on partition gpu: it asks 4 CPUs per GPU (cpus_per_gpu), its largest '
           'node has 2 CPUs (`sinfo -o "%P %c"`); set cpus_per_gpu to at most 2 in profiles/slurm/config.yaml')


def set_slurm_profile(workdir: Path, cpus_per_gpu: int) -> None:
    """profiles/slurm as its comments tell a user of this cluster to set it: no accounting (squeue for the jobs'
    status), no accounts, and ``cpus_per_gpu`` CPUs per GPU."""
    path = workdir / "profiles/slurm/config.yaml"
    text = path.read_text(encoding="utf-8")
    for line in ("# slurm-status-command: squeue", "# slurm-no-account: true"):
        text = text.replace(line, line.removeprefix("# "))
    text, changed = re.subn(r"^  cpus_per_gpu: \d+", f"  cpus_per_gpu: {cpus_per_gpu}", text, flags=re.M)
    assert changed == 1 and "\nslurm-status-command: squeue" in text and "\nslurm-no-account: true" in text
    path.write_text(text, encoding="utf-8")


@pytest.mark.slurm
def test_slurm_profile_runs_a_model_job_and_a_cpu_job_on_a_real_slurm(smoke_run, tmp_path):
    """Through profiles/slurm on a one-node Slurm started here (tests/slurm_cluster.py: 2 CPUs, 16 GB, one GPU,
    partitions cpu and gpu, no accounting, no accounts): the profile's 4 CPUs per GPU is refused in one line before
    any sbatch; with 1, the model job runs on partition gpu and the CPU job on cpu, and both write byte for byte what
    the local run wrote. The daemons are stopped, and nothing of the cluster is left running."""
    reason = slurm_cluster.missing()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path / "smoke"
    shutil.copytree(smoke_run, workdir, symlinks=True)
    for path in SLURM_SLICE:
        (workdir / path).unlink()
    # the plugin looks at its jobs 40 s after submitting them by default, then 10 s later each time none has ended
    args = ["--workflow-profile", "profiles/slurm", *SLURM_SLICE, "--configfile", "config/smoke.yaml",
            "--slurm-init-seconds-before-status-checks", "5"]
    folder = tmp_path / "slurm"
    with slurm_cluster.one_node_slurm(folder) as cluster:
        set_slurm_profile(workdir, cpus_per_gpu=4)  # the profile's own value
        refused = snakemake(workdir, *args, env=cluster.env, timeout=300)
        assert refused.returncode == 1 and refused.stderr.strip().splitlines()[-1] == REFUSED, refused.stderr[-3000:]
        assert cluster.jobs() == []  # nothing was submitted

        set_slurm_profile(workdir, cpus_per_gpu=1)
        done = snakemake(workdir, *args, env=cluster.env, timeout=300)
        assert done.returncode == 0, done.stderr[-4000:] + cluster.logs()
        assert cluster.jobs() == sorted((*job, "COMPLETED") for job in SLURM_SLICE.values())
    assert slurm_cluster.leftovers(folder) == []
    for path in [*SLURM_SLICE, "results/eval/base/sizes.json"]:
        assert (workdir / path).read_bytes() == (smoke_run / path).read_bytes(), path


# --------------------------------------------------------------------------- a killed GRPO run, resumed
MAX_STEPS = 12
CONFIG = ["--configfile", "config/smoke.yaml", "--config", f'grpo={{"max_steps":{MAX_STEPS},"save_steps":2}}']
TARGET = "results/runs/grpo/train.json"
ADAPTER = "results/runs/grpo/adapter"
ROLLOUTS = "results/runs/grpo/rollouts.jsonl"
CHECKPOINTS = "results/checkpoints/grpo-grpo"
LOG = "results/logs/train-grpo.log"
# smoke: 8 GRPO prompts, 2 per step -> 4 steps per epoch. Killing after checkpoint-4 makes the rerun resume in
# a later epoch than the first, where the prompt order must still match the uninterrupted run's.
KILL_AFTER_CHECKPOINT = 4


def complete_checkpoints(folder: Path) -> list[int]:
    """Steps of the checkpoints the Trainer finished writing: trainer_state.json, its last file, readable (a file
    that exists may still be half-written, and a resume would rightly pass over it)."""
    def finished(path: Path) -> bool:
        try:
            return "global_step" in json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False

    return sorted(int(path.name.split("-")[1]) for path in folder.glob("checkpoint-*") if finished(path))


def start_and_kill(workdir: Path, output: Path) -> None:
    """Start the GRPO job in its own process group; SIGKILL the whole group once a checkpoint is written."""
    checkpoints = workdir / CHECKPOINTS
    argv, env = snakemake_call(TARGET, *CONFIG)
    with open(output, "w") as handle:
        process = subprocess.Popen(argv, cwd=workdir, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not any(step >= KILL_AFTER_CHECKPOINT for step in complete_checkpoints(checkpoints)):
            assert process.poll() is None, f"GRPO ended before it could be killed:\n{output.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "no checkpoint within 300 s"
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # Snakemake and the training script it started
        process.wait()
    assert process.returncode == -signal.SIGKILL, output.read_text()[-3000:]


def adapter_tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return {name: tensor for path in sorted(folder.glob("*.safetensors")) for name, tensor in load_file(path).items()}


def test_killed_grpo_resumes_from_last_checkpoint(smoke_run, tmp_path):
    """GRPO stretched to 12 steps with a checkpoint every 2 on a copy of the finished smoke run, killed with SIGKILL
    mid-training, resumes from its last checkpoint when rerun, and ends exactly where an uninterrupted run ends."""
    workdir = tmp_path / "smoke"
    shutil.copytree(smoke_run, workdir, symlinks=True)  # the base and SFT adapter GRPO starts from, up to date

    start_and_kill(workdir, tmp_path / "killed.txt")
    assert not (workdir / ADAPTER).exists() and not (workdir / TARGET).exists()
    assert complete_checkpoints(workdir / CHECKPOINTS), "the checkpoints did not survive the kill"
    first_run = [json.loads(line) for line in (workdir / CHECKPOINTS / "step_metrics.jsonl").read_text().splitlines()]

    rerun = snakemake(workdir, TARGET, *CONFIG)
    if rerun.returncode != 0 and "--unlock" in rerun.stdout + rerun.stderr:
        # A SIGKILLed Snakemake leaves its directory lock behind and says to run --unlock once: do as it says.
        unlock = snakemake(workdir, TARGET, *CONFIG, "--unlock")
        assert unlock.returncode == 0, unlock.stderr[-3000:]
        rerun = snakemake(workdir, TARGET, *CONFIG)
    assert rerun.returncode == 0, rerun.stderr[-4000:]

    log = (workdir / LOG).read_text()
    resumed = re.search(r"resuming from checkpoint-(\d+)", log)
    assert resumed, log[-3000:]
    step = int(resumed.group(1))
    assert step >= KILL_AFTER_CHECKPOINT
    trained_now = [line for line in log.splitlines() if line.startswith("{'loss'")]
    assert len(trained_now) == MAX_STEPS - step, "the rerun trained steps the checkpoint already had"

    result = json.loads((workdir / TARGET).read_text())
    assert [s["step"] for s in result["steps"]] == list(range(1, MAX_STEPS + 1))
    assert result["steps"][:step] == [s for s in first_run if s["step"] <= step]  # kept from the killed run
    assert (workdir / ADAPTER / "adapter_config.json").is_file()
    assert not (workdir / CHECKPOINTS).exists(), "checkpoints are removed once the stage succeeds"

    # The same job uninterrupted: every step's numbers, every rollout and the adapter are identical.
    resumed_adapter = adapter_tensors(workdir / ADAPTER)
    resumed_rollouts = (workdir / ROLLOUTS).read_text()
    fresh = snakemake(workdir, TARGET, "--forcerun", "train", *CONFIG)
    assert fresh.returncode == 0, fresh.stderr[-4000:]
    assert "resuming from" not in (workdir / LOG).read_text()
    uninterrupted = json.loads((workdir / TARGET).read_text())
    assert result["steps"] == uninterrupted["steps"]
    assert resumed_rollouts == (workdir / ROLLOUTS).read_text()
    fresh_adapter = adapter_tensors(workdir / ADAPTER)
    assert resumed_adapter.keys() == fresh_adapter.keys()
    assert all((resumed_adapter[name] == fresh_adapter[name]).all() for name in fresh_adapter)


def test_shipped_base_gives_the_same_numbers_and_is_refused_for_other_settings(smoke_run, tmp_path):
    """The smoke run's base and adapter shipped (thai_grpo_tools.ship_base), then loaded by base.source: shipped: the
    headline's scores are those of the run that trained them; another pretraining length is refused before training."""
    second = copy_workflow(tmp_path)
    made = subprocess.run([sys.executable, "-m", "thai_grpo_tools.ship_base", "--from", str(smoke_run / "results/model"),
                           "--data", str(smoke_run / "results/data"), "--configfile", "config/config.yaml",
                           "config/smoke.yaml", "--commit", "test", "--out", "assets/tiny-base"],
                          cwd=second, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-3000:]
    sft = 'sft={"source": "shipped"}'
    refused = snakemake(second, "results/headline.json", "--configfile", "config/smoke.yaml", "--config",
                        'base={"source": "shipped", "pretrain": {"max_steps": 5}}', sft)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "base.pretrain.max_steps: shipped 4, config 5" in out and "snakemake --cores 2 base" in out, out[-3000:]
    assert not (second / "results/benchmarks/train-grpo.tsv").exists()

    shipped = ["--config", 'base={"source": "shipped"}', sft]
    rebuild = snakemake(second, "base", "-n", "--configfile", "config/smoke.yaml", *shipped)
    assert scheduled_jobs(rebuild) == {"base_model_scratch": 1, "sft_adapter_scratch": 1, "base": 1}
    done = snakemake(second, "results/headline.json", "--configfile", "config/smoke.yaml", *shipped)
    assert done.returncode == 0, done.stderr[-4000:]
    for model in ["base", "sft", "grpo"]:
        assert (second / f"results/eval/{model}/scores.json").read_text() == \
            (smoke_run / f"results/eval/{model}/scores.json").read_text(), model
    assert (second / "results/headline.json").read_text() == (smoke_run / "results/headline.json").read_text()


def test_a_second_heldout_set_added_later_runs_only_its_own_stages(smoke_run, tmp_path):
    """A local MGSM-format set added to a copy of the finished smoke run: Snakemake schedules only its own stages (and
    the results and report), no main one, so the main held-out numbers cannot move; its data stage drops and counts a
    problem the GRPO training set holds. Sampling and scoring a second set with every model, its paired tests and its
    report section run end to end in the real-config rehearsal (tests/test_real_config_rehearsal.py)."""
    workdir = tmp_path / "smoke"
    shutil.copytree(smoke_run, workdir, symlinks=True)  # copy2 keeps the mtimes: the copy is up to date
    seen = json.loads((workdir / "results/data/train.jsonl").read_text().splitlines()[0])["question"]
    extra = write_extra_set_config(workdir, rows=[{"question": seen, "answer": None, "answer_number": 3,
                                                   "equation_solution": None}])
    args = ["--configfile", "config/smoke.yaml", str(extra)]
    models = json.loads((workdir / "results/results.json").read_text())["config"]["eval"]["models"]
    assert scheduled_jobs(snakemake(workdir, "-n", *args)) == {
        "extra_heldout": 1, "sample_extra": len(models), "score_extra": len(models), "results": 1, "figures": 1,
        "report": 1, "all": 1}
    done = snakemake(workdir, "results/data/extra/mgsm_th.jsonl", *args)
    assert done.returncode == 0, done.stderr[-4000:]
    rows = [json.loads(line) for line in (workdir / "results/data/extra/mgsm_th.jsonl").read_text().splitlines()]
    assert [r["answer"] for r in rows] == [7, 18, 16, 9] and seen not in [r["question"] for r in rows]
    assert json.loads((workdir / "results/data/extra/mgsm_th_stats.json").read_text()) == {
        "source_rows": 5, "duplicates_removed": 0, "seen_in_training_dropped": 1, "problems": 4}


def test_hacking_target_trains_three_format_rewards_from_one_brief_adapter(smoke_run, tmp_path):
    """`snakemake hacking` on a copy of the finished smoke run: only the brief thinkers' SFT adapter, the three
    hacking variants and their results and page run (nothing of the default DAG); each run records the think-block
    shares per step and starts from the brief adapter."""
    workdir = tmp_path / "smoke"
    shutil.copytree(smoke_run, workdir, symlinks=True)
    args = ["hacking", "--configfile", "config/smoke.yaml"]
    assert scheduled_jobs(snakemake(workdir, "-n", *args)) == {
        "sft_adapter_brief": 1, "train": 3, "hacking_results": 1, "hacking_report": 1, "hacking": 1}
    done = snakemake(workdir, *args)
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads((workdir / "results/hacking/results.json").read_text())
    assert {name: run["format_reward"] for name, run in results["runs"].items()} == {
        "hack_lenient": "format_lenient", "hack_strict": "format", "hack_checked": "format_checked"}
    for run in results["runs"].values():
        assert run["max_completion_length"] == 32 and run["steps"]
        assert all(s["blank_think_share"] is not None and s["hollow_think_paid_share"] is not None
                   for s in run["steps"])
    assert set(results["verdicts"]) == set(results["runs"]) and results["loophole_verdict"]
    assert all(results["seconds"][stage] > 0 for stage in results["seconds"])
    assert results["jobs_ran_on"] == [{"cpu": this_machine()["cpu"], "commit": "unknown",
                                       "jobs": len(results["seconds"])}]
    html = (workdir / "results/hacking/report.html").read_text()
    assert f"<h1>{results['title']}</h1>" in html and "data:image/png;base64," in html  # the title the runs decided
    assert all(run["detector"]["settings"]["window"] == 3 for run in results["runs"].values())
