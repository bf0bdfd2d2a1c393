"""Stage 5b: a second held-out set (eval.extra_sets, e.g. MGSM Thai) as held-out rows, without the problems a
training set holds (dropped and counted in its stats)."""

from thai_grpo.core.io import read_jsonl, write_json, write_jsonl
from thai_grpo.jobs.job import log_to
from thai_grpo.data.problems import extra_heldout_rows, extra_set_source, load_source_dataset

log_to(snakemake.log[0])
spec, where = snakemake.params.spec, f"eval.extra_sets.{snakemake.wildcards.extra}"
records = load_source_dataset(extra_set_source(spec), kind="held-out set", where=f"{where}.path")
training = {name: read_jsonl(snakemake.input[name]) for name in ("train", "sft", "pretrain")}
rows, stats = extra_heldout_rows(records, spec, where, **training)
print(stats)
write_jsonl(snakemake.output.rows, rows)
write_json(snakemake.output.stats, stats)
