# Stage 3: the base model and the SFT LoRA adapter. Offline they are loaded from the shipped folder
# (base.source: shipped, assets/tiny-base/, checked against the config and data that built it) or trained here
# (base.source: scratch, sft.source: train); for the real run they are downloaded at pinned revisions. Either way:
# results/model/base (model + tokenizer), results/model/sft_adapter. `snakemake base` builds both from scratch:
# into results/model/ under scratch/train, into results/model/scratch/ under shipped (then `make ship-base`).

BUILDS_BASE = config["base"]["source"] in ("scratch", "shipped")
SCRATCH_NAME = {"scratch": "", "shipped": "_scratch"}.get(config["base"]["source"], "")
SCRATCH_DIR = "results/model/scratch" if SCRATCH_NAME else "results/model"

if BUILDS_BASE:

    rule:
        name:
            f"base_model{SCRATCH_NAME}"
        input:
            pretrain=rules.split.output.pretrain,
            sft=rules.split.output.sft,
        output:
            model=directory(f"{SCRATCH_DIR}/base"),
            history=f"{SCRATCH_DIR}/base_history.json",
        log:
            f"results/logs/base_model{SCRATCH_NAME}.log",
        benchmark:
            f"results/benchmarks/base_model{SCRATCH_NAME}.tsv"
        priority: CHAIN_TRAINING  # the headline's chain first (rules/common.smk)
        conda:
            "../envs/pipeline.yaml"
        threads: 2
        resources:
            gpu=1,  # a model stage: one job per GPU, each on its own (profiles/default), side by side on a CPU
            runtime=60,  # minutes (a cluster's time limit): pretraining the tiny base takes a few
        params:
            base=config["base"],
            corpus=config["corpus"],
            seed=config["seed"],
            system_prompt=SYSTEM,
            checkpoints=results_path(f"results/checkpoints/base{SCRATCH_NAME}"),
        message:
            "Training a tokenizer and pretraining a tiny Qwen3 from scratch"
        script:
            "../scripts/build_base.py"


if config["base"]["source"] == "shipped":

    rule base_model:
        input:
            pretrain=rules.split.output.pretrain,  # hashed against the shipped record: same data, same base
            sft=rules.split.output.sft,
        output:
            model=directory("results/model/base"),
        log:
            "results/logs/base_model.log",
        benchmark:
            "results/benchmarks/base_model.tsv"
        priority: CHAIN_TRAINING
        conda:
            "../envs/pipeline.yaml"
        params:
            shipped=SHIPPED_DIR,
            recipe=SHIPPED_RECIPE,
            part="base",
        message:
            "Loading the shipped base model ({params.shipped}/base), checked against the data that built it"
        script:
            "../scripts/load_shipped.py"

elif config["base"]["source"] != "scratch":

    rule base_model:
        output:
            model=directory("results/model/base"),
        log:
            "results/logs/base_model.log",
        benchmark:
            "results/benchmarks/base_model.tsv"
        localrule: True  # a download: on a cluster it runs on the login node (compute nodes may be offline)
        conda:
            "../envs/pipeline.yaml"
        params:
            spec=config["base"],
            kind="base model",
        message:
            "Fetching the base model {config[base][name_or_path]}"
        script:
            "../scripts/download_model.py"


if config["sft"]["source"] in ("train", "shipped"):

    rule:
        name:
            f"sft_adapter{SCRATCH_NAME}"
        input:
            base=f"{SCRATCH_DIR}/base" if SCRATCH_NAME else rules.base_model.output.model,
            sft=rules.split.output.sft,
        output:
            adapter=directory(f"{SCRATCH_DIR}/sft_adapter"),
            history=f"{SCRATCH_DIR}/sft_history.json",
        log:
            f"results/logs/sft_adapter{SCRATCH_NAME}.log",
        benchmark:
            f"results/benchmarks/sft_adapter{SCRATCH_NAME}.tsv"
        priority: CHAIN_TRAINING
        conda:
            "../envs/pipeline.yaml"
        threads: 2
        resources:
            gpu=1,
            runtime=60,
        params:
            sft=config["sft"],
            corpus=config["corpus"],
            seed=config["seed"],
            system_prompt=SYSTEM,
            dtype=TRAIN_DTYPE,
            checkpoints=results_path(f"results/checkpoints/sft{SCRATCH_NAME}"),
        message:
            "Training the SFT LoRA adapter on {config[data][sft_size]} examples"
        script:
            "../scripts/train_sft.py"


if config["sft"]["source"] == "shipped":

    rule sft_adapter:
        input:
            base=rules.base_model.output.model,  # after the base's check of the data
        output:
            adapter=directory("results/model/sft_adapter"),
        log:
            "results/logs/sft_adapter.log",
        benchmark:
            "results/benchmarks/sft_adapter.tsv"
        priority: CHAIN_TRAINING
        conda:
            "../envs/pipeline.yaml"
        params:
            shipped=SHIPPED_DIR,
            recipe=SHIPPED_RECIPE,
            part="sft_adapter",
        message:
            "Loading the shipped SFT adapter ({params.shipped}/sft_adapter)"
        script:
            "../scripts/load_shipped.py"

elif config["sft"]["source"] != "train":

    rule sft_adapter:
        output:
            adapter=directory("results/model/sft_adapter"),
        log:
            "results/logs/sft_adapter.log",
        benchmark:
            "results/benchmarks/sft_adapter.tsv"
        localrule: True
        conda:
            "../envs/pipeline.yaml"
        params:
            spec=config["sft"],
            kind="adapter",
        message:
            "Downloading the SFT adapter {config[sft][name_or_path]}"
        script:
            "../scripts/download_model.py"


if BUILDS_BASE:

    rule base:  # `snakemake --cores 2 base`: the base and the SFT adapter built from scratch (then `make ship-base`)
        input:
            f"{SCRATCH_DIR}/base",
            f"{SCRATCH_DIR}/sft_adapter",
