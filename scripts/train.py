"""Stage 4: one variant from the SFT adapter with its method's trainer: GRPO, RLOO, DPO or PPO (thai_grpo.methods)."""

from thai_grpo.core.accelerators import start_model_job
from thai_grpo.core.io import end_job, log_to, read_jsonl, write_json
from thai_grpo.methods import train_variant
from thai_grpo.models.memory_plan import record_cuda_peak
from thai_grpo.models.training import set_threads

log_to(snakemake.log[0])
start_model_job(snakemake.config)  # its own GPU, or the CPU (config `device`), or a one-line stop
record_cuda_peak(snakemake.log[0])  # only under scripts/gpu_check.sh
set_threads(snakemake.threads)  # the cores Snakemake gave this job: jobs may run side by side
pairs = read_jsonl(snakemake.input.pairs) if "pairs" in snakemake.input.keys() else None
result = train_variant(snakemake.params.plan, snakemake.input.base, snakemake.input.adapter,
                       read_jsonl(snakemake.input.train), pairs, snakemake.params.system_prompt,
                       snakemake.output.adapter, snakemake.params.checkpoints, snakemake.params.seed,
                       reward_dir=snakemake.input.get("reward_model"), dtype=snakemake.params.dtype)
write_json(snakemake.output.train, result)
end_job()  # outputs written: skip the interpreter teardown of torch and the model (thai_grpo.core.io)
