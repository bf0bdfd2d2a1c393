"""Stage 4: one variant from the SFT adapter with its method's trainer: GRPO, RLOO, DPO or PPO (thai_grpo.methods)."""

from pathlib import Path

from thai_grpo.core.accelerators import start_model_job
from thai_grpo.core.io import end_job, log_to, read_jsonl, write_json
from thai_grpo.methods import RunSpec, train_variant
from thai_grpo.models.memory_plan import record_cuda_peak
from thai_grpo.models.training import set_threads

log_to(snakemake.log[0])
start_model_job(snakemake.config)  # its own GPU, or the CPU (config `device`), or a one-line stop
record_cuda_peak(snakemake.log[0])  # only under scripts/gpu_check.sh
set_threads(snakemake.threads)  # the cores Snakemake gave this job: jobs may run side by side
spec = RunSpec(run=snakemake.wildcards.run, plan=snakemake.params.plan, base_dir=Path(snakemake.input.base),
               adapter_dir=Path(snakemake.input.adapter), train_rows=read_jsonl(snakemake.input.train),
               system_prompt=snakemake.params.system_prompt, out_dir=Path(snakemake.output.adapter),
               checkpoint_dir=Path(snakemake.params.checkpoints), seed=snakemake.params.seed,
               dtype=snakemake.params.dtype, training=snakemake.params.training,
               pairs=read_jsonl(snakemake.input.pairs) if "pairs" in snakemake.input.keys() else None,
               reward_dir=snakemake.input.get("reward_model"), rollouts=Path(snakemake.output.rollouts))
write_json(snakemake.output.train, train_variant(spec))
end_job()  # outputs written: skip the interpreter teardown of torch and the model (thai_grpo.core.io)
