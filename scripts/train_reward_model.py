"""Stage 4 (PPO only): the reward model, TRL's RewardTrainer on the verifier-ranked preference pairs."""

from thai_grpo.core.accelerators import start_model_job
from thai_grpo.core.io import end_job, log_to, read_jsonl, write_json
from thai_grpo.methods.reward_model import train_reward_model
from thai_grpo.models.memory_plan import record_cuda_peak
from thai_grpo.models.training import set_threads

log_to(snakemake.log[0])
start_model_job(snakemake.config)  # its own GPU, or the CPU (config `device`), or a one-line stop
record_cuda_peak(snakemake.log[0])  # only under scripts/gpu_check.sh
set_threads(snakemake.threads)  # the cores Snakemake gave this job: jobs may run side by side
result = train_reward_model(snakemake.input.base, read_jsonl(snakemake.input.pairs),
                            snakemake.params.reward_model.get("args", {}), snakemake.params.lora,
                            snakemake.output.model, snakemake.params.checkpoints, snakemake.params.seed,
                            snakemake.params.chat_template_kwargs, dtype=snakemake.params.dtype,
                            training=snakemake.params.training)
write_json(snakemake.output.train, result)
end_job()  # outputs written: skip the interpreter teardown of torch and the model (thai_grpo.core.io)
