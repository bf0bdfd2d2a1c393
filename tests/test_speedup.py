"""The pipeline's schedule (tests/schedule_replay.py replays Snakemake's): its choice of jobs against brute force,
dependencies kept on a hand-made DAG, and the headline never waiting for the other methods, simulated on the real DAG
at 1 to 8 cores; the benchmark files' job names and seconds."""

from __future__ import annotations

import itertools
import random

import pytest
from schedule_replay import job_name, pick_jobs, simulate, workflow_jobs
from workflow import copy_workflow

from thai_grpo.report.headline import headline, headline_line
from thai_grpo.report.results import benchmark_column

# base -> sft -> {grpo, rloo, pairs -> dpo}; each trained model -> sample -> score; all scores -> results
DEPS = {"split": [], "base": ["split"], "sft": ["base"], "grpo": ["sft"], "rloo": ["sft"], "pairs": ["sft"],
        "dpo": ["pairs"], "sample-grpo": ["grpo"], "sample-rloo": ["rloo"], "sample-dpo": ["dpo"],
        "results": ["sample-grpo", "sample-rloo", "sample-dpo"]}
SECONDS = {"split": 1, "base": 300, "sft": 50, "grpo": 150, "rloo": 250, "pairs": 30, "dpo": 40,
           "sample-grpo": 40, "sample-rloo": 20, "sample-dpo": 20, "results": 2}
LONGEST_CHAIN_S = 1 + 300 + 50 + 250 + 20 + 2  # split -> base -> sft -> rloo -> sample-rloo -> results

def test_benchmark_names_and_files(tmp_path):
    assert job_name("train", {"run": "grpo"}) == "train-grpo" and job_name("split", {}) == "split"
    (tmp_path / "train-grpo.tsv").write_text("s\th:m:s\tmax_rss\n158.25\t0:02:38\t900\n")
    assert benchmark_column(tmp_path, "s") == {"train-grpo": 158.25}


def test_headline_is_the_paired_difference_of_grpo_and_sft():
    def scores(correct):
        n = len(correct)
        return {"pass@1": {"estimate": sum(correct) / n, "bootstrap_low": 0.0, "bootstrap_high": 1.0},
                "greedy_accuracy": {"estimate": 0.5}, "per_problem_correct": correct, "n_samples": 1,
                "per_problem_greedy": correct}

    record = headline({"sft": scores([0, 1, 0, 0]), "grpo": scores([1, 1, 1, 0])}, n_boot=200, seed=0)
    assert record["models"]["sft"]["pass@1"] == 0.25 and record["models"]["grpo"]["pass@1"] == 0.75
    assert record["grpo_minus_sft"]["mean_diff"] == pytest.approx(0.5)
    line = headline_line(record)
    assert line.startswith("Headline ready: SFT 0.250 -> GRPO 0.750") and "results/headline.json" in line


@pytest.fixture(scope="module")
def default_jobs(tmp_path_factory):
    return workflow_jobs(copy_workflow(tmp_path_factory.mktemp("dag")), cores=2)


def test_headline_jobs_come_before_the_other_methods(default_jobs):
    jobs = default_jobs
    headline_jobs = {"base_model", "sft_adapter", "train-grpo", "sample-base", "sample-sft", "sample-grpo",
                     "score-base", "score-sft", "score-grpo", "headline"}
    assert headline_jobs <= set(jobs)
    lowest_headline = min(jobs[name]["priority"] for name in headline_jobs)
    others = [n for n, j in jobs.items() if n not in headline_jobs and j["rule"] in
              ("train", "sample", "score", "preference_pairs", "reward_model")]
    assert {"train-ppo", "train-dr_grpo", "train-dpo", "sample-ppo"} <= set(others)
    assert all(jobs[n]["priority"] < lowest_headline for n in others)
    # the headline's own training chain before its sampling: GRPO starts as soon as SFT ends
    assert jobs["train-grpo"]["priority"] > jobs["sample-base"]["priority"]
    assert "score-grpo" in jobs["headline"]["deps"] and "train-ppo" not in jobs["headline"]["deps"]


def test_threads_per_job_do_not_depend_on_the_cores(tmp_path):
    """One thread per job at 2 cores as at 16: more cores run more jobs, the same numbers."""
    workdir = copy_workflow(tmp_path)
    at2, at16 = workflow_jobs(workdir, cores=2), workflow_jobs(workdir, cores=16)
    assert {n: j["threads"] for n, j in at2.items()} == {n: j["threads"] for n, j in at16.items()}
    assert at2["train-grpo"]["threads"] == at2["sample-grpo"]["threads"] == at2["train-ppo"]["threads"] == 1


def test_pick_jobs_is_the_best_set_that_fits_by_brute_force():
    rng = random.Random(0)
    for _ in range(300):
        names = [f"j{i}" for i in range(rng.randint(1, 7))]
        jobs = {n: {"threads": rng.randint(1, 3), "priority": rng.choice([0, 1, 2, 10, 30])} for n in names}
        free = rng.randint(0, 6)
        fits = [c for r in range(len(names) + 1) for c in itertools.combinations(names, r)
                if sum(jobs[n]["threads"] for n in c) <= free]
        value = lambda c: (sum(jobs[n]["priority"] for n in c), sum(jobs[n]["threads"] for n in c))  # noqa: E731
        picked = pick_jobs(names, jobs, free)
        assert sum(jobs[n]["threads"] for n in picked) <= free
        assert value(picked) == max(map(value, fits))


def test_simulate_keeps_dependencies_and_never_uses_more_cores_than_given():
    jobs = {name: {"deps": deps, "threads": 2 if name in ("base", "grpo") else 1, "priority": 0}
            for name, deps in DEPS.items()}
    for cores in (1, 2, 3, 8):
        times = simulate(SECONDS, jobs, cores)
        assert all(times[d][1] <= times[job][0] for job, deps in DEPS.items() for d in deps)
        for moment in {start for start, _ in times.values()}:
            busy = sum(min(jobs[n]["threads"], cores) for n, (s, e) in times.items() if s <= moment < e)
            assert busy <= cores
    assert max(end for _, end in simulate(SECONDS, jobs, 1).values()) == sum(SECONDS.values())
    assert max(end for _, end in simulate(SECONDS, jobs, 8).values()) == LONGEST_CHAIN_S


# Seconds per job on 2 cores (a make run on AMD EPYC), for the schedule's shape; jobs not named take 1 s.
MEASURED = {"train-grpo": 104, "train-dr_grpo": 176, "train-rloo": 192, "train-ppo": 236, "train-dpo": 33,
            "sample-base": 26, "sample-sft": 29, "sample-grpo": 28, "sample-dr_grpo": 39, "sample-rloo": 40,
            "sample-dpo": 41, "sample-ppo": 38, "preference_pairs": 27, "reward_model": 19,
            "reward_model_accuracy": 10, "token_logprobs": 12, "figures": 5}


def headline_end(jobs, seconds, cores):
    return simulate(seconds, jobs, cores)["headline"][1]


def headline_alone(jobs):
    keep, todo = set(), ["headline"]
    while todo:
        job = todo.pop()
        keep.add(job)
        todo += [d for d in jobs[job]["deps"] if d not in keep]
    return {name: jobs[name] for name in keep}


@pytest.mark.parametrize("cores", [1, 2, 3, 4, 8, 16])
def test_the_other_methods_never_delay_the_headline(default_jobs, cores):
    """Simulated with Snakemake's choice of jobs, at the measured seconds and at random ones (0.3x to 3x each): the
    headline is ready when it would be were its own jobs the only work (every job on one thread, the headline's
    outranking the rest: a free core always goes to a ready headline job)."""
    rng = random.Random(cores)
    draws = [{n: MEASURED.get(n, 1) * rng.uniform(0.3, 3) for n in default_jobs} for _ in range(20)]
    draws.append({n: MEASURED.get(n, 1) for n in default_jobs})
    alone = headline_alone(default_jobs)
    for seconds in draws:
        assert headline_end(default_jobs, seconds, cores) == headline_end(alone, seconds, cores)


def test_the_longest_chain_starts_before_the_other_methods(default_jobs):
    """On 2 cores PPO's chain (preference pairs -> reward model -> PPO) takes the core the headline leaves free, and
    every other method's training starts after PPO's."""
    times = simulate({n: MEASURED.get(n, 1) for n in default_jobs}, default_jobs, 2)
    others = [n for n, j in default_jobs.items() if j["rule"] == "train" and n not in ("train-grpo", "train-ppo")]
    assert others and all(times["train-ppo"][0] <= times[n][0] for n in others)
    assert times["train-ppo"][0] < times["train-grpo"][1]  # beside GRPO's training, not after it


def test_with_the_chain_above_the_headline_sampling_the_headline_waits(default_jobs):
    """The first check can fail: were PPO's chain to outrank the headline's sampling, it would hold the core that
    base and SFT are sampled on, and the headline would wait for it."""
    raised = {name: {**job, "priority": 35 if job["rule"] in ("preference_pairs", "reward_model") or name ==
                     "train-ppo" else job["priority"]} for name, job in default_jobs.items()}
    seconds = {n: MEASURED.get(n, 1) for n in default_jobs}
    assert headline_end(raised, seconds, 2) > headline_end(headline_alone(raised), seconds, 2) + 30


def test_every_job_takes_one_thread_and_the_headline_outranks_the_rest(default_jobs):
    assert {j["threads"] for n, j in default_jobs.items() if j["rule"] in ("train", "sample", "score")} == {1}
    headline = set(headline_alone(default_jobs)) - {"dataset", "split", "base_model", "sft_adapter"}
    lowest = min(default_jobs[n]["priority"] for n in headline)
    assert all(j["priority"] < lowest for n, j in default_jobs.items() if n not in headline_alone(default_jobs))
    priority = {n: j["priority"] for n, j in default_jobs.items()}  # rules/common.smk's ranks, as Snakemake sees them
    assert priority["train-grpo"] > priority["sample-grpo"] > priority["score-grpo"] > priority["train-ppo"]
    assert priority["train-ppo"] > priority["train-dr_grpo"] > priority["sample-dr_grpo"]

