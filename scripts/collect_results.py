"""Stage 6b: every stage's numbers in one document, results/results.json (or results/pitfalls/results.json)."""

from thai_grpo.core.io import read_json, read_jsonl, write_json
from thai_grpo.jobs.job import end_job, log_to
from thai_grpo.analyses.chapter import recorded_values, stage_records
from thai_grpo.analyses.update_size import adapter_displacements
from thai_grpo.jobs.machine import commit_of
from thai_grpo.report.results import (assemble, benchmark_column, jobs_ran_on, safetensors_parameter_count,
                                      stage_logs)
from thai_grpo.report.rollouts import example_groups, hollow_think_completions, pitfall_numbers

log_to(snakemake.log[0])
params = snakemake.params
scores = {model: read_json(path) for model, path in zip(params.models, snakemake.input.scores)}
trains = {variant: read_json(path) for variant, path in zip(params.variants, snakemake.input.train)}
problems = {row["id"]: row for row in read_jsonl(snakemake.input.train_rows)}
for variant, path in zip(params.variants, snakemake.input.rollouts):  # GRPO's and RLOO's groups, from their rollouts
    train = trains[variant]
    if train.get("method") in ("grpo", "rloo"):
        rollouts = read_jsonl(path)
        train["example_groups"] = example_groups(rollouts, train["args"]["num_generations"], train["optimizer_steps"],
                                                 problems)
        train["empty_think_examples"] = hollow_think_completions(rollouts)
        train["pitfalls"] = pitfall_numbers(rollouts, train["args"]["num_generations"])  # the report's section 9
pairs = read_json(snakemake.input.pairs) if "pairs" in snakemake.input.keys() else None
reward_model = read_json(snakemake.input.reward_model) if "reward_model" in snakemake.input.keys() else None
reward_model_train = read_json(snakemake.input.reward_model_train) if reward_model else None
sizes = {model: read_json(path) for model, path in zip(params.models, snakemake.input.sizes)}
kl_real = read_json(snakemake.input.kl_real) if "kl_real" in snakemake.input.keys() else None
# Second held-out sets: expand() listed the scores set by set, each in eval.models order.
extra_scores = iter(snakemake.input.get("extra_scores", []))
extra_sets = {name: {"stats": read_json(stats),
                     "scores": {model: read_json(next(extra_scores)) for model in params.extra_models}}
              for name, stats in zip(params.extra_sets, snakemake.input.get("extra_stats", []))}
own_temperature = {model: read_json(path) for model, path in
                   zip(params.own_temperature, snakemake.input.get("own_temperature", []))}
results = assemble(params.config, read_json(snakemake.input.stats), scores, trains,
                   benchmark_column(params.benchmarks, "s"), safetensors_parameter_count(snakemake.input.base),
                   params.config["eval"]["bootstrap_samples"], params.config["eval"]["seed"],
                   plans=params.plans, pairs=pairs, kl_real=kl_real, extra_sets=extra_sets,
                   own_temperature=own_temperature, peak_memory=benchmark_column(params.benchmarks, "max_rss"),
                   reward_model=reward_model, sizes=sizes,
                   displacements=adapter_displacements(dict(zip(params.variants, snakemake.input.adapters)),
                                                       snakemake.input.sft_adapter),
                   chapter_values=recorded_values(params.config, stage_records(trains, reward_model_train)),
                   reward_model_train=reward_model_train)
# The checkout's commit when the numbers were collected (make compare names each run by it).
results["run"]["commit"] = commit_of(".")
# The CPUs and commits the jobs timed in this run card ran on, from their logs (thai_grpo.report.results.jobs_ran_on).
results["run"]["jobs_ran_on"] = jobs_ran_on(stage_logs(params.benchmarks, results["run"]["benchmarks"]))
write_json(snakemake.output.results, results)
end_job()  # outputs written: skip the interpreter teardown of torch and the model (thai_grpo.core.io)
