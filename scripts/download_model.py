"""Stage 3 (real run): fetch a base model or an adapter at a pinned revision (or copy a local folder)."""

from thai_grpo.core.hub import fetch_model
from thai_grpo.jobs.job import log_to

log_to(snakemake.log[0])
spec = snakemake.params.spec
fetch_model(spec["source"], spec["name_or_path"], spec.get("revision"), snakemake.output[0],
            kind=snakemake.params.kind)
