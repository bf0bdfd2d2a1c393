"""Stage 6: unbiased pass@k with Wilson and problem-level bootstrap intervals for one model."""

from thai_grpo.core.io import log_to, read_jsonl, write_json
from thai_grpo.evaluation.scoring import score_model

log_to(snakemake.log[0])
ev = snakemake.params.eval
scores = score_model(read_jsonl(snakemake.input.samples), ev["ks"], ev["bootstrap_samples"], ev["seed"])
write_json(snakemake.output.scores, scores)
