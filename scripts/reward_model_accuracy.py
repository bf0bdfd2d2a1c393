"""Evaluation only: the reward model's pairwise accuracy on its training pairs and on held-out pairs built the same
way (a correct and a wrong SFT sample of one held-out problem) from the SFT policy's held-out samples."""

from thai_grpo.core.io import read_json, read_jsonl, write_json
from thai_grpo.jobs.devices import job_device
from thai_grpo.models.sampling import evaluation_precision
from thai_grpo.jobs.job import model_job
from thai_grpo.methods.ppo import load_value_model
from thai_grpo.methods.preferences import build_pairs
from thai_grpo.methods.reward_model import pairwise_accuracy
from thai_grpo.models.frozen import merge_keeps_update
from thai_grpo.models.loading import load_tokenizer, weights_dtype

with model_job(snakemake):  # its log, its own GPU or the CPU (or a one-line stop), its threads; then a quick exit
    dtype = snakemake.params.dtype  # eval.dtype: an evaluation stage, float32 by default (thai_grpo_tools/precision_probe.py)
    model = load_value_model(snakemake.input.base, snakemake.input.model, trainable=False,
                             merged=merge_keeps_update(dtype), dtype=dtype)
    model = model.to(job_device()).eval()
    precision = evaluation_precision(weights_dtype(model), model.device)  # float32: TF32 off, or a one-line stop
    tokenizer = load_tokenizer(snakemake.input.base)
    heldout_pairs, heldout_stats = build_pairs(read_jsonl(snakemake.input.heldout), snakemake.params.system_prompt)
    kwargs = snakemake.params.chat_template_kwargs

    train = read_json(snakemake.input.train)
    write_json(snakemake.output.accuracy, {
        "train": pairwise_accuracy(model, tokenizer, read_jsonl(snakemake.input.pairs), chat_template_kwargs=kwargs),
        "heldout": {**pairwise_accuracy(model, tokenizer, heldout_pairs, chat_template_kwargs=kwargs),
                    "problems": heldout_stats["problems"], "all_right": heldout_stats["all_right"],
                    "all_wrong": heldout_stats["all_wrong"]},
        "labels": train["labels"], "parameters": train["parameters"], "steps": train["steps"],
        "skipped": train.get("skipped"), "dtype": weights_dtype(model), **precision})
