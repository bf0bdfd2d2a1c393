"""Stage 7a: every figure of the report, drawn from results/results.json."""

from thai_grpo.figures import draw_all
from thai_grpo.io import log_to, read_json

log_to(snakemake.log[0])
draw_all(read_json(snakemake.input.results), snakemake.output.figures)
