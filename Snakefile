# GRPO with code-graded rewards on Thai grade-school math: data -> base + SFT adapter -> GRPO -> held-out
# sampling -> pass@k with intervals -> figures -> one HTML report. `snakemake --cores 1` runs it offline.

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/model.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/report.smk"


onstart:
    # TRL field names need TRL imported (seconds): checked once before the first job, never on dry-runs.
    try:
        check_trainer_fields(config)
    except ConfigError as error:
        sys.exit(f"config error: {error}")


rule all:
    input:
        rules.results.output.results,
        rules.report.output.html,
