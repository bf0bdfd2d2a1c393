"""Stage 7b: one self-contained HTML page from the results, figures and a few escaped samples."""

from pathlib import Path

from thai_grpo.io import log_to, read_json, read_jsonl
from thai_grpo.report import write_report

log_to(snakemake.log[0])
results = read_json(snakemake.input.results)
if snakemake.input.get("seeds"):  # results/seeds/results.json: the seed study's verdicts beside each row
    results["seed_study"] = read_json(snakemake.input.seeds)
if snakemake.input.get("passk"):  # the large-k results, once `snakemake passk` has built them
    results["passk"] = read_json(snakemake.input.passk)
if snakemake.input.get("hacking"):  # the reward-hacking experiment, once `snakemake hacking` has built it
    results["hacking"] = read_json(snakemake.input.hacking)
samples = {model: read_jsonl(path) for model, path in zip(snakemake.params.models, snakemake.input.samples)}
write_report(results, samples, Path(snakemake.input.figures),
             Path(snakemake.input.template).parent, snakemake.output.html)
