"""Stage 7b: one self-contained HTML page from the results, figures and a few escaped samples."""

from pathlib import Path

from thai_grpo.io import log_to, read_json, read_jsonl
from thai_grpo.report import write_report

log_to(snakemake.log[0])
samples = {model: read_jsonl(path) for model, path in zip(snakemake.params.models, snakemake.input.samples)}
results = read_json(snakemake.input.results)
if "passk" in snakemake.input.keys():  # the large-k results, once `snakemake passk` has built them
    results["passk"] = read_json(snakemake.input.passk)
write_report(results, samples, Path(snakemake.input.figures),
             Path(snakemake.input.template).parent, snakemake.output.html)
