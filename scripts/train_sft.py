"""Stage 3b (offline): the SFT LoRA adapter, trained with TRL on prompt-completion examples."""

from thai_grpo.core.accelerators import start_model_job
from thai_grpo.core.io import end_job, log_to, read_jsonl, write_json
from thai_grpo.data.corpus import brief_thinks, noisy_solutions
from thai_grpo.data.problems import sft_records
from thai_grpo.models.sft import train_sft_adapter
from thai_grpo.models.training import set_threads

log_to(snakemake.log[0])
start_model_job(snakemake.config)  # its own GPU, or the CPU (config `device`), or a one-line stop
set_threads(snakemake.threads)  # the cores Snakemake gave this job: jobs may run side by side
sft, corpus = snakemake.params.sft, snakemake.params.corpus
rows = noisy_solutions(read_jsonl(snakemake.input.sft), corpus["sft_slip_rate"], corpus["seed"] + 1)
brief = getattr(snakemake.params, "brief_think", None)  # the reward-hacking experiment's adapter (rule sft_adapter_brief)
if brief:
    rows = brief_thinks(rows, brief["empty_think_share"], brief["one_line_think_share"], corpus["seed"] + 2)
records = sft_records(rows, snakemake.params.system_prompt)
history = train_sft_adapter(snakemake.input.base, records, sft["lora"], sft["args"], snakemake.output.adapter,
                            snakemake.params.checkpoints, snakemake.params.seed, dtype=snakemake.params.dtype)
write_json(snakemake.output.history, history)
end_job()  # outputs written: skip the interpreter teardown of torch and the model (thai_grpo.core.io)
