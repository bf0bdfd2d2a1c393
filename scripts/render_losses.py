"""The loss-family study's page: results/losses/report.html, its figures drawn into results/losses/figures."""

from pathlib import Path

from thai_grpo.core.io import atomic_write_text, read_json
from thai_grpo.jobs.job import log_to
from thai_grpo_studies.losses import render_losses_report

log_to(snakemake.log[0])
html = render_losses_report(read_json(snakemake.input.results), snakemake.output.figures,
                            Path(snakemake.input.template).parent)
atomic_write_text(snakemake.output.html, html)
