"""Stage 5: n sampled completions (and one greedy) per held-out problem, each with its rewards."""

from thai_grpo.io import log_to, read_jsonl, write_jsonl
from thai_grpo.models import load_policy, load_tokenizer
from thai_grpo.sampling import sample_heldout

log_to(snakemake.log[0])
ev = snakemake.params.eval
model = load_policy(snakemake.input.base, snakemake.input.get("adapter"), dtype=snakemake.params.dtype).eval()
tokenizer = load_tokenizer(snakemake.input.base)
records = sample_heldout(model, tokenizer, read_jsonl(snakemake.input.heldout), snakemake.params.system_prompt,
                         ev["num_samples"], ev["max_new_tokens"], ev["temperature"], ev["batch_size"], ev["seed"],
                         ev.get("chat_template_kwargs"), progress=print)
write_jsonl(snakemake.output.samples, records)
