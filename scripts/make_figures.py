"""Stage 7a: every figure of the report, drawn from results/results.json."""

import shutil
from pathlib import Path

from thai_grpo.core.io import read_json
from thai_grpo.jobs.job import end_job, log_to
from thai_grpo.report.figures import draw_all

log_to(snakemake.log[0])
draw_all(read_json(snakemake.input.results), snakemake.output.figures)
passk = snakemake.params.get("studies", {}).get("passk")
large_k = Path(passk["path"]).with_name("pass_at_k_large.png") if passk else None
if large_k and large_k.is_file():  # drawn by `snakemake passk` (rules/common.smk OPTIONAL_RESULTS)
    shutil.copyfile(large_k, Path(snakemake.output.figures) / large_k.name)
end_job()  # outputs written: skip the interpreter teardown of torch and the model (thai_grpo.core.io)
