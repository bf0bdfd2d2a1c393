# GRPO with code-graded rewards on Thai grade-school math: data -> base + SFT adapter -> GRPO (and Dr.GRPO,
# RLOO, DPO, PPO with its reward model, from the same adapter) -> held-out sampling -> pass@k with intervals
# -> figures -> one HTML report. `snakemake --cores 2` runs it offline; `snakemake --cores 2 pitfalls` adds the
# pitfall variants' report; `snakemake --cores 2 passk` pass@k to k = 64 (shown by the main report once built);
# `snakemake --cores 2 seeds` retrains the RL methods at more training seeds (results/seeds/).
# `snakemake --cores 2 hacking` the reward-hacking experiment (results/hacking/report.html).
# `snakemake --cores 2 losses` GRPO's loss family (TRL's defaults, DAPO, GSPO, ...) against the chapter's grpo at
# the seed study's training seeds (results/losses/report.html).

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
    # TRL field names need TRL imported (seconds): checked once before the first job, never on dry-runs.
    try:
        check_trainer_fields(config)
        check_method_fields(config)
    except ConfigError as error:
        sys.exit(f"config error: {error}")


rule all:
    input:
        HEADLINE_TARGET,  # first: SFT vs GRPO, while the other methods train
        rules.results.output.results,
        rules.report.output.html,


rule pitfalls:
    input:
        rules.results_pitfalls.output.results,
        rules.report_pitfalls.output.html,


rule passk:  # pass@k to k = 64 for base, SFT and GRPO (~3 min on 2 cores); `snakemake` then shows it
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


rule chains:  # every method rebuilt at each chains.seeds seed (~12 min a chain on 2 cores); `snakemake` then shows it
    input:
        rules.chain_results.output.results,


rule losses:
    input:
        rules.loss_results.output.results,
        rules.loss_report.output.html,
