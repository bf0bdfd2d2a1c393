"""Chain study: results/chains/results.json from every chain's held-out scores and hacking runs
(thai_grpo_studies.chain_stats, thai_grpo_studies.hacking.summarise_hacking_chains)."""

import sys
from pathlib import Path

from thai_grpo.core.io import read_json, write_json
from thai_grpo.jobs.job import log_to
from thai_grpo_studies.chain_stats import chain_study
from thai_grpo.evaluation.plan import analysis_plan
from thai_grpo_studies.hacking import summarise_hacking_chains
from thai_grpo_studies.study_words import with_sentences
from thai_grpo.report.results import benchmark_column, jobs_ran_on, stage_logs

log_to(snakemake.log[0])
params = snakemake.params
heldout = {seed: Path(path).read_bytes() for seed, path in zip(params.seeds, snakemake.input.heldout)}
if len(set(heldout.values())) != 1:
    sys.exit("chain study: the chains' held-out sets differ (data seeds must not depend on the top-level seed); "
             "rebuild them with `snakemake --cores 2 chains --forcerun split`")
scores = iter(snakemake.input.scores)  # chains.smk lists them chain by chain, model by model
runs = {model: [] for model in params.models}
for seed in params.seeds:
    for model in params.models:
        runs[model].append({"seed": seed, "sampling_seed": params.sampling_seeds[seed], "scores": read_json(next(scores))})
hacking = {seed: read_json(path) for seed, path in zip(params.seeds, snakemake.input.hacking)}
study = chain_study(runs, n_boot=params.n_boot, seed=params.eval_seed, plan=analysis_plan({"analysis": params.analysis}))
study["pairs"] = {metric: with_sentences(tests, len(params.seeds)) for metric, tests in study["pairs"].items()}
seconds = {seed: benchmark_column(folder, "s") for seed, folder in params.benchmarks.items()}
# A chain's cost: the stages an added chain runs (its own benchmarks), counted alike in the config's chain, whose
# benchmarks folder also holds the optional targets' stages (seeds, passk, losses ...).
chain_stages = set().union(*(stages for seed, stages in seconds.items() if seed != params.default_seed))
seconds = {seed: {stage: s for stage, s in stages.items() if stage in chain_stages} for seed, stages in seconds.items()}
write_json(snakemake.output.results, {
    **study, "default_seed": params.default_seed, "sampling_seeds": {str(s): v for s, v in params.sampling_seeds.items()},
    "num_problems": runs["sft"][0]["scores"]["num_problems"], "n_samples": runs["sft"][0]["scores"]["n_samples"],
    "hacking": summarise_hacking_chains(hacking),
    "cost": {"per_chain_seconds": {seed: sum(stages.values()) for seed, stages in seconds.items()},
             "stages": seconds},
    "jobs_ran_on": jobs_ran_on([log for seed, stages in seconds.items()
                                for log in stage_logs(params.benchmarks[seed], stages)]),
    "settings_fingerprint": params.settings_fingerprint})
