"""Stage 5: n sampled completions (and one greedy) per held-out problem, each with its rewards.

The pipeline's decode loop (thai_grpo.models.decoding), on the GPU when there is one, each sample from its own seed.
"""

from thai_grpo.core.io import progress, read_jsonl, write_json, write_jsonl
from thai_grpo.jobs.devices import job_device
from thai_grpo.jobs.job import model_job
from thai_grpo.jobs.memory_stages import sampling_sizes
from thai_grpo.models.frozen import load_for_evaluation
from thai_grpo.models.loading import load_tokenizer, weights_dtype
from thai_grpo.models.sampling import evaluation_precision, sample_heldout

with model_job(snakemake):  # its log, its own GPU or the CPU (or a one-line stop), its threads; then a quick exit
    ev = snakemake.params.eval
    rows = read_jsonl(snakemake.input.heldout)[:ev.get("problems")]  # the passk set: the first `problems` (None: all)
    # eval.batch_size / passk.batch_size: a number, or auto (the most the memory plan fits on this job's GPU)
    sizes = sampling_sizes(ev["batch_size"], snakemake.input.base, ev["num_samples"], ev["max_new_tokens"], len(rows),
                           job_device())
    # eval.dtype (float32 by default: a 16-bit pass loses the real run's small update, thai_grpo_tools/precision_probe.py)
    model = load_for_evaluation(snakemake.input.base, snakemake.input.get("adapter"), snakemake.params.dtype)
    model = model.to(job_device())  # load_policy leaves the model on the CPU; generate follows model.device
    precision = evaluation_precision(weights_dtype(model), model.device)  # float32: TF32 off, or a one-line stop
    tokenizer = load_tokenizer(snakemake.input.base)
    records = sample_heldout(model, tokenizer, rows, snakemake.params.system_prompt, ev["num_samples"],
                             ev["max_new_tokens"], ev["temperature"], sizes["batch_size"], ev["seed"],
                             ev.get("chat_template_kwargs"), progress=progress,
                             cuda_graphs=ev.get("cuda_graphs", False) and model.device.type == "cuda")
    records = [{**record, "dtype": weights_dtype(model)} for record in records]  # for the scores and the run card
    write_jsonl(snakemake.output.samples, [{**record, **precision} for record in records])  # the scores copy them
    write_json(snakemake.output.sizes, {**sizes, **precision})
