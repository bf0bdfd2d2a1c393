"""Stage 4 (DPO only): the SFT policy's own samples on the training problems, graded, paired chosen / rejected."""

from thai_grpo.core.io import progress, read_jsonl, write_json, write_jsonl
from thai_grpo.models.sampling import evaluation_precision
from thai_grpo.jobs.devices import job_device
from thai_grpo.jobs.job import model_job
from thai_grpo.jobs.memory_stages import sampling_sizes
from thai_grpo.methods.preferences import build_pairs, sample_training_problems
from thai_grpo.models.frozen import load_for_evaluation
from thai_grpo.models.loading import load_tokenizer, weights_dtype

with model_job(snakemake):  # its log, its own GPU or the CPU (or a one-line stop), its threads; then a quick exit
    rows = read_jsonl(snakemake.input.train)
    sampling = snakemake.params.sampling
    sizes = sampling_sizes(sampling["batch_size"], snakemake.input.base, sampling["num_samples"],
                           sampling["max_new_tokens"], len(rows), job_device())  # auto: before the weights load
    sampling = {**sampling, "batch_size": sizes["batch_size"], "sizes": sizes}
    model = load_for_evaluation(snakemake.input.base, snakemake.input.adapter, snakemake.params.dtype)  # eval.dtype
    model = model.to(job_device())
    precision = evaluation_precision(weights_dtype(model), model.device)  # float32: TF32 off, or a one-line stop
    records = sample_training_problems(model, load_tokenizer(snakemake.input.base), rows,
                                       snakemake.params.system_prompt, sampling["num_samples"],
                                       sampling["max_new_tokens"], sampling["temperature"], sampling["batch_size"],
                                       sampling["seed"], sampling["chat_template_kwargs"], progress=progress)
    pairs, stats = build_pairs(records, snakemake.params.system_prompt)
    print(stats)
    write_jsonl(snakemake.output.pairs, pairs)
    write_json(snakemake.output.stats, {**stats, "sampling": sampling, "dtype": weights_dtype(model), **precision})
