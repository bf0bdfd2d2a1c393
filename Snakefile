# GRPO with code-graded rewards on Thai grade-school math: data -> base + SFT adapter -> GRPO (and Dr.GRPO, DPO,
# PPO with its reward model, from the same adapter) -> held-out sampling -> pass@k with intervals -> figures -> one
# HTML report. `snakemake --cores all` runs it offline. Optional targets, each with its own results: pitfalls
# (the pitfall variants' report), passk (pass@k at large k), seeds (more training seeds), hacking (the
# reward-hacking experiment), chains (whole chains at other seeds), losses (GRPO's loss family).

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/model.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/reward_model.smk"
include: "rules/extra_sets.smk"
include: "rules/passk.smk"
include: "rules/report.smk"
include: "rules/headline.smk"
include: "rules/seeds.smk"
include: "rules/hacking.smk"
include: "rules/chains.smk"
include: "rules/losses.smk"


onstart:
    slurm_check()  # on SLURM: a job no node of its partition can hold stops the run here, before any sbatch


rule all:
    input:
        HEADLINE_TARGET,  # first: SFT vs GRPO, while the other methods train
        rules.results.output.results,
        rules.report.output.html,


rule pitfalls:
    input:
        rules.results_pitfalls.output.results,
        rules.report_pitfalls.output.html,


rule passk:  # pass@k to k = passk.num_samples for passk.models; `snakemake` then shows it
    input:
        rules.passk_results.output.results,


rule seeds:
    input:
        rules.seed_results.output.results,
        rules.report_seeds.output.html,


rule hacking:
    input:
        rules.hacking_results.output.results,
        rules.hacking_report.output.html,


rule chains:  # every method rebuilt at each chains.seeds seed; `snakemake` then shows it
    input:
        rules.chain_results.output.results,


rule losses:
    input:
        rules.loss_results.output.results,
        rules.loss_report.output.html,
