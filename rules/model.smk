# Stage 3: the base model and the SFT LoRA adapter. Offline they are trained here; for the real run they are
# downloaded at pinned revisions. Either way: results/model/base (model + tokenizer), results/model/sft_adapter.

if config["base"]["source"] == "scratch":

    rule base_model:
        input:
            pretrain=rules.split.output.pretrain,
            sft=rules.split.output.sft,
        output:
            model=directory("results/model/base"),
            history="results/model/base_history.json",
        log:
            "results/logs/base_model.log",
        benchmark:
            "results/benchmarks/base_model.tsv"
        conda:
            "../envs/training.yaml"
        threads: 2
        resources:
            gpu=1,  # `--resources gpu=1`: one model stage on the GPU at a time
        params:
            base=config["base"],
            corpus=config["corpus"],
            seed=config["seed"],
            system_prompt=SYSTEM,
            checkpoints=results_path("results/checkpoints/base"),
        message:
            "Training a tokenizer and pretraining a tiny Qwen3 from scratch"
        script:
            "../scripts/build_base.py"

else:

    rule base_model:
        output:
            model=directory("results/model/base"),
        log:
            "results/logs/base_model.log",
        benchmark:
            "results/benchmarks/base_model.tsv"
        localrule: True  # a download: on a cluster it runs on the login node (compute nodes may be offline)
        conda:
            "../envs/training.yaml"
        params:
            spec=config["base"],
            kind="base model",
        message:
            "Fetching the base model {config[base][name_or_path]}"
        script:
            "../scripts/download_model.py"


if config["sft"]["source"] == "train":

    rule sft_adapter:
        input:
            base=rules.base_model.output.model,
            sft=rules.split.output.sft,
        output:
            adapter=directory("results/model/sft_adapter"),
            history="results/model/sft_history.json",
        log:
            "results/logs/sft_adapter.log",
        benchmark:
            "results/benchmarks/sft_adapter.tsv"
        conda:
            "../envs/training.yaml"
        threads: 2
        resources:
            gpu=1,
        params:
            sft=config["sft"],
            corpus=config["corpus"],
            seed=config["seed"],
            system_prompt=SYSTEM,
            checkpoints=results_path("results/checkpoints/sft"),
        message:
            "Training the SFT LoRA adapter on {config[data][sft_size]} examples"
        script:
            "../scripts/train_sft.py"

else:

    rule sft_adapter:
        output:
            adapter=directory("results/model/sft_adapter"),
        log:
            "results/logs/sft_adapter.log",
        benchmark:
            "results/benchmarks/sft_adapter.tsv"
        localrule: True
        conda:
            "../envs/training.yaml"
        params:
            spec=config["sft"],
            kind="adapter",
        message:
            "Downloading the SFT adapter {config[sft][name_or_path]}"
        script:
            "../scripts/download_model.py"
