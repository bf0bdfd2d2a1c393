"""Stage 3b (offline): the SFT LoRA adapter, trained with TRL on prompt-completion examples."""

from thai_grpo.core.io import read_jsonl, write_json
from thai_grpo.data.corpus import brief_thinks, noisy_solutions
from thai_grpo.data.problems import sft_records
from thai_grpo.jobs.job import model_job
from thai_grpo.models.sft import train_sft_adapter

with model_job(snakemake):  # its log, its own GPU or the CPU (or a one-line stop), its threads; then a quick exit
    sft, corpus = snakemake.params.sft, snakemake.params.corpus
    rows = noisy_solutions(read_jsonl(snakemake.input.sft), corpus["sft_slip_rate"], corpus["seed"] + 1)
    # the reward-hacking experiment's adapter (rule sft_adapter_brief)
    brief = getattr(snakemake.params, "brief_think", None)
    if brief:
        rows = brief_thinks(rows, brief["empty_think_share"], brief["one_line_think_share"], corpus["seed"] + 2)
    records = sft_records(rows, snakemake.params.system_prompt)
    history = train_sft_adapter(snakemake.input.base, records, sft["lora"], sft["args"], snakemake.output.adapter,
                                snakemake.params.checkpoints, snakemake.params.seed, dtype=snakemake.params.dtype)
    write_json(snakemake.output.history, history)
