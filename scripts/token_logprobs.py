"""Stage 6a: per-token log-probs of the GRPO policy's held-out samples under GRPO and SFT: KL(GRPO || SFT)."""

from thai_grpo.core.io import read_jsonl, write_json
from thai_grpo.evaluation.token_logprobs import policy_and_reference_logprobs
from thai_grpo.jobs.job import model_job

with model_job(snakemake):  # its log, its own GPU or the CPU (or a one-line stop), its threads; then a quick exit
    result = policy_and_reference_logprobs(snakemake.input.base, snakemake.input.policy, snakemake.input.reference,
                                           read_jsonl(snakemake.input.samples), snakemake.params.system_prompt,
                                           snakemake.params.max_completions,
                                           chat_template_kwargs=snakemake.params.chat_template_kwargs,
                                           temperature=snakemake.params.temperature, dtype=snakemake.params.dtype)
    print(f"{len(result['logp_policy'])} tokens from {result['num_completions']} completions")
    write_json(snakemake.output.logprobs, result)
