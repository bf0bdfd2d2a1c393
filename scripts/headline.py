"""The headline (thai_grpo.report.headline): SFT vs GRPO, written and announced before the other methods finish."""

from thai_grpo.core.io import progress, read_json, write_json
from thai_grpo.jobs.job import log_to
from thai_grpo.report.headline import headline, headline_line

log_to(snakemake.log[0])
ev = snakemake.params.eval
record = headline({name: read_json(path) for name, path in zip(snakemake.params.models, snakemake.input.scores)},
                  ev["bootstrap_samples"], ev["seed"])
write_json(snakemake.output.headline, record)
progress(headline_line(record, snakemake.output.headline))  # onto the terminal, while the other jobs run
