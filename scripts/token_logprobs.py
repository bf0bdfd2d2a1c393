"""Stage 6a: per-token log-probs of the GRPO policy's held-out samples under GRPO and SFT: KL(GRPO || SFT)."""

from thai_grpo.core.accelerators import start_model_job
from thai_grpo.core.io import end_job, log_to, read_jsonl, write_json
from thai_grpo.evaluation.token_logprobs import policy_and_reference_logprobs
from thai_grpo.models.memory_plan import record_cuda_peak
from thai_grpo.models.training import set_threads

log_to(snakemake.log[0])
start_model_job(snakemake.config)  # its own GPU, or the CPU (config `device`), or a one-line stop
record_cuda_peak(snakemake.log[0])  # only under scripts/gpu_check.sh
set_threads(snakemake.threads)  # the cores Snakemake gave this job: jobs may run side by side
result = policy_and_reference_logprobs(snakemake.input.base, snakemake.input.policy, snakemake.input.reference,
                                       read_jsonl(snakemake.input.samples), snakemake.params.system_prompt,
                                       snakemake.params.max_completions,
                                       chat_template_kwargs=snakemake.params.chat_template_kwargs,
                                       temperature=snakemake.params.temperature, dtype=snakemake.params.dtype)
print(f"{len(result['logp_policy'])} tokens from {result['num_completions']} completions")
write_json(snakemake.output.logprobs, result)
end_job()  # outputs written: skip the interpreter teardown of torch and the model (thai_grpo.core.io)
