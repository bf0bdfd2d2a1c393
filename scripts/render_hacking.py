"""The reward-hacking experiment's page: results/hacking/report.html, its curves drawn into results/hacking/figures."""

from pathlib import Path

from thai_grpo.hacking import render_hacking_report
from thai_grpo.io import atomic_write_text, log_to, read_json

log_to(snakemake.log[0])
html = render_hacking_report(read_json(snakemake.input.results), snakemake.output.figures,
                             Path(snakemake.input.template).parent)
atomic_write_text(snakemake.output.html, html)
