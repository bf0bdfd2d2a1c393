"""Seed study: results/seeds/results.json from every seed run's held-out scores (thai_grpo_studies.seed_stats)."""

from thai_grpo.core.io import read_json, write_json
from thai_grpo.jobs.job import log_to
from thai_grpo.evaluation.plan import analysis_plan
from thai_grpo.report.results import benchmark_column, jobs_ran_on, stage_logs
from thai_grpo_studies.seed_stats import seed_costs, seed_study
from thai_grpo_studies.study_words import with_sentences

log_to(snakemake.log[0])
params = snakemake.params
runs = {}
for (variant, run, seed), sampling_seed, path in zip(params.runs, params.sampling_seeds, snakemake.input.scores):
    runs.setdefault(variant, []).append({"run": run, "seed": seed, "sampling_seed": sampling_seed,
                                         "scores": read_json(path)})
study = seed_study(runs, plan=analysis_plan({"analysis": params.analysis}))
study["pairs"] = with_sentences(study["pairs"])  # the sentences the main report shows
cost = seed_costs(benchmark_column(params.benchmarks, "s"), [run for _, run, _ in params.runs],
                  [variant for variant, _, _ in params.runs])
write_json(snakemake.output.results, {
    "training_seeds": list(params.seeds), "default_seed": params.default_seed, "eval_seed": params.eval_seed,
    "num_problems": next(iter(runs.values()))[0]["scores"]["num_problems"],
    "n_samples": next(iter(runs.values()))[0]["scores"]["n_samples"],
    **study, "cost": cost, "jobs_ran_on": jobs_ran_on(stage_logs(params.benchmarks, cost["stages"])),
    "settings_fingerprint": params.settings_fingerprint})
