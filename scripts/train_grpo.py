"""Stage 4: GRPO with TRL's GRPOTrainer from the SFT adapter (see thai_grpo.grpo for the exact algorithm)."""

from thai_grpo.grpo import train_grpo
from thai_grpo.io import log_to, read_jsonl, write_json

log_to(snakemake.log[0])
settings = snakemake.params.settings
result = train_grpo(snakemake.input.base, snakemake.input.adapter, read_jsonl(snakemake.input.train),
                    settings["grpo"], settings["rewards"], snakemake.params.system_prompt, snakemake.output.adapter,
                    snakemake.params.checkpoints, snakemake.params.seed)
write_json(snakemake.output.train, result)
