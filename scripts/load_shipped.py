"""Stage 3 (offline default): the shipped base model or SFT adapter (base.source: shipped), refused in one line when
the config or the data differ from what built it, then placed like a local hub snapshot (thai_grpo.core.shipped)."""

import sys

from thai_grpo.core import shipped
from thai_grpo.core.config import ConfigError
from thai_grpo.core.hub import fetch_model
from thai_grpo.core.io import progress, read_jsonl
from thai_grpo.jobs.job import log_to

log_to(snakemake.log[0])
folder, part = snakemake.params.shipped, snakemake.params.part
try:
    manifest = shipped.read_manifest(folder)
    shipped.check_recipe(manifest, snakemake.params.recipe)
    if part == shipped.BASE_DIR:  # the data once, for the base (the adapter's job waits for it)
        shipped.check_data(manifest, read_jsonl(snakemake.input.pretrain), read_jsonl(snakemake.input.sft))
    shipped.check_files(folder, manifest)
except ConfigError as error:
    progress(f"config error: {error}")  # onto the terminal too, not only into the log
    sys.exit(1)
kind = "base model" if part == shipped.BASE_DIR else "adapter"
fetch_model("local", f"{folder}/{part}", None, snakemake.output[0], kind=kind)
print(f"{kind}: {folder}/{part} (built at commit {manifest['commit']}), checked against built_by.json")
