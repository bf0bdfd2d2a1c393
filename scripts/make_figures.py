"""Stage 7a: every figure of the report, drawn from results/results.json."""

from thai_grpo.figures import draw_all
from thai_grpo.io import log_to, read_json

log_to(snakemake.log[0])
results = read_json(snakemake.input.results)
if "passk" in snakemake.input.keys():  # the large-k results, once `snakemake passk` has built them
    results["passk"] = read_json(snakemake.input.passk)
draw_all(results, snakemake.output.figures)
