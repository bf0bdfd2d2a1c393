"""Stage 7a: every figure of the report, drawn from results/results.json."""

from thai_grpo.core.io import log_to, read_json
from thai_grpo.report.figures import draw_all

log_to(snakemake.log[0])
results = read_json(snakemake.input.results)
passk = snakemake.params.get("studies", {}).get("passk")
if passk:  # the large-k results, once `snakemake passk` has built them (rules/common.smk OPTIONAL_RESULTS)
    results["passk"] = read_json(passk["path"])
draw_all(results, snakemake.output.figures)
