"""Stage 7a: every figure of the report, drawn from results/results.json."""

from thai_grpo.core.io import log_to, read_json
from thai_grpo.report.figures import draw_all

log_to(snakemake.log[0])
results = read_json(snakemake.input.results)
if "passk" in snakemake.input.keys():  # the large-k results, once `snakemake passk` has built them
    results["passk"] = read_json(snakemake.input.passk)
draw_all(results, snakemake.output.figures)
