"""Loss-family study: results/losses/results.json from each run's scores and train.json (thai_grpo_studies.losses)."""

from thai_grpo.core.io import read_json, write_json
from thai_grpo.jobs.job import log_to
from thai_grpo.evaluation.plan import analysis_plan
from thai_grpo_studies.losses import loss_results
from thai_grpo.report.results import benchmark_column, jobs_ran_on, stage_logs

log_to(snakemake.log[0])
params = snakemake.params
runs, trains = {}, {}
for (variant, run, seed), scores, train in zip(params.runs, snakemake.input.scores, snakemake.input.train):
    runs.setdefault(variant, []).append({"run": run, "seed": seed, "scores": read_json(scores)})
    trains[run] = read_json(train)
results = loss_results(runs, trains, params.plans, benchmark_column(params.benchmarks, "s"), baseline=params.baseline,
                       analysis=analysis_plan({"analysis": params.analysis}))
jobs = [f"{kind}-{run}" for run, kinds in results["cost"]["runs"].items() for kind in kinds]
write_json(snakemake.output.results, {**results, "jobs_ran_on": jobs_ran_on(stage_logs(params.benchmarks, jobs)),
                                      "settings_fingerprint": params.settings_fingerprint})
