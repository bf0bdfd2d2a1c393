"""Stage 6c (target passk): pass@k to k = n with bands, the SFT-GRPO crossing and the problems created and lost, with
its sentence and figure for the main report."""

from thai_grpo.core.io import read_json, write_json
from thai_grpo.jobs.job import log_to
from thai_grpo.report.results import benchmark_column, jobs_ran_on, stage_logs
from thai_grpo_studies.large_k import large_k_results, plot_large_k
from thai_grpo_studies.study_words import large_k_verdict

log_to(snakemake.log[0])
params = snakemake.params
ev = params.eval
results = large_k_results({model: read_json(path) for model, path in zip(params.models, snakemake.input.scores)},
                          ev["bootstrap_samples"], ev["seed"])
seconds = {stage: s for stage, s in benchmark_column(params.benchmarks, "s").items()
           if stage.partition("-")[0] in ("sample_passk", "score_passk")}
plot_large_k(results, snakemake.output.figure)
write_json(snakemake.output.results, {**results, "verdict": large_k_verdict(results), "models": params.models,
                                      "settings": ev,
                                      "problems_chosen": f"the first {ev['problems']} of results/data/heldout.jsonl",
                                      "benchmarks": seconds, "jobs_ran_on": jobs_ran_on(stage_logs(params.benchmarks, seconds)),
                                      "settings_fingerprint": params.settings_fingerprint})
