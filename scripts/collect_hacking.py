"""The reward-hacking experiment's numbers: results/hacking/results.json (thai_grpo_studies.hacking)."""

from thai_grpo.core.io import read_json, read_jsonl, write_json
from thai_grpo.jobs.job import log_to
from thai_grpo_studies.hacking import hacking_results
from thai_grpo.report.results import benchmark_column, jobs_ran_on, stage_logs
from thai_grpo.report.rollouts import hollow_think_completions

log_to(snakemake.log[0])
params = snakemake.params
trains = {variant: read_json(path) for variant, path in zip(params.variants, snakemake.input.train)}
for variant, path in zip(params.variants, snakemake.input.rollouts):
    trains[variant]["empty_think_examples"] = hollow_think_completions(read_jsonl(path))
results = hacking_results(trains, params.plans, params.sft_shares, benchmark_column(params.benchmarks, "s"),
                          params.detector)
write_json(snakemake.output.results, {**results, "jobs_ran_on": jobs_ran_on(stage_logs(params.benchmarks, results["seconds"])),
                                      "settings_fingerprint": params.settings_fingerprint})
