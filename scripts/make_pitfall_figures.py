"""The pitfalls report's figures: the report's own, then one per pitfall (thai_grpo_studies.pitfall_figures)."""

from thai_grpo.core.io import read_json
from thai_grpo.jobs.job import end_job, log_to
from thai_grpo.report.figures import draw_all
from thai_grpo_studies.pitfall_figures import draw_pitfalls

log_to(snakemake.log[0])
results = read_json(snakemake.input.results)
draw_all(results, snakemake.output.figures)
draw_pitfalls(results, snakemake.output.figures)
end_job()  # outputs written: skip the interpreter teardown of torch and the model (thai_grpo.core.io)
