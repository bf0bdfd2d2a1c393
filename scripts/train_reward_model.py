"""Stage 4 (PPO only): the reward model, TRL's RewardTrainer on the verifier-ranked preference pairs."""

from thai_grpo.core.io import read_jsonl, write_json
from thai_grpo.jobs.job import model_job
from thai_grpo.methods.reward_model import train_reward_model

with model_job(snakemake):  # its log, its own GPU or the CPU (or a one-line stop), its threads; then a quick exit
    result = train_reward_model(snakemake.input.base, read_jsonl(snakemake.input.pairs),
                                snakemake.params.reward_model.get("args", {}), snakemake.params.lora,
                                snakemake.output.model, snakemake.params.checkpoints, snakemake.params.seed,
                                snakemake.params.chat_template_kwargs, snakemake.params.training,
                                dtype=snakemake.params.dtype)
    write_json(snakemake.output.train, result)
