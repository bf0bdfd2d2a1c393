"""The reward-hacking experiment's page: results/hacking/report.html, its curves drawn into results/hacking/figures."""

from pathlib import Path

from thai_grpo.core.io import atomic_write_text, read_json
from thai_grpo.jobs.job import log_to
from thai_grpo_studies.hacking import render_hacking_report

log_to(snakemake.log[0])
chains = read_json(snakemake.input.chains)["hacking"] if snakemake.input.get("chains") else None
html = render_hacking_report(read_json(snakemake.input.results), snakemake.output.figures,
                             Path(snakemake.input.template).parent, chains=chains)
atomic_write_text(snakemake.output.html, html)
