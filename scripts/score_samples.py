"""Stage 6: unbiased pass@k with Wilson and problem-level bootstrap intervals for one model."""

from thai_grpo.core.io import read_jsonl, write_json
from thai_grpo.jobs.job import log_to
from thai_grpo.evaluation.scoring import score_model

log_to(snakemake.log[0])
ev = snakemake.params.eval
records = read_jsonl(snakemake.input.samples)
scores = score_model(records, ev["ks"], ev["bootstrap_samples"], ev["seed"])
# the sampler's weights (eval.dtype), device and float32 matmul precision, for the run card
for key in ("dtype", "device", "matmul_precision"):
    scores[key] = records[0].get(key) if records else None
write_json(snakemake.output.scores, scores)
