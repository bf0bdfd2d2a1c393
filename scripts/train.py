"""Stage 4: one variant from the SFT adapter with its method's trainer: GRPO, RLOO, DPO or PPO (thai_grpo.methods)."""

from pathlib import Path

from thai_grpo.core.io import read_jsonl, write_json
from thai_grpo.jobs.job import model_job
from thai_grpo.methods import RunSpec, train_variant

with model_job(snakemake):  # its log, its own GPU or the CPU (or a one-line stop), its threads; then a quick exit
    spec = RunSpec(run=snakemake.wildcards.run, plan=snakemake.params.plan, base_dir=Path(snakemake.input.base),
                   adapter_dir=Path(snakemake.input.adapter), train_rows=read_jsonl(snakemake.input.train),
                   system_prompt=snakemake.params.system_prompt, out_dir=Path(snakemake.output.adapter),
                   checkpoint_dir=Path(snakemake.params.checkpoints), seed=snakemake.params.seed,
                   dtype=snakemake.params.dtype, training=snakemake.params.training,
                   pairs=read_jsonl(snakemake.input.pairs) if "pairs" in snakemake.input.keys() else None,
                   reward_dir=snakemake.input.get("reward_model"), rollouts=Path(snakemake.output.rollouts))
    write_json(snakemake.output.train, train_variant(spec))
