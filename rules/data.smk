# Stages 1-2: the source rows, then one seeded shuffle into disjoint held-out / GRPO / SFT / pretraining sets.


rule dataset:
    output:
        rows="results/data/source.jsonl",
    log:
        "results/logs/dataset.log",
    benchmark:
        "results/benchmarks/dataset.tsv"
    localrule: config["data"]["source"] == "hub"  # on a cluster: download on the login node (nodes may be offline)
    conda:
        "../envs/pipeline.yaml"
    params:
        data=config["data"],
    message:
        "Loading the {config[data][source]} Thai GSM8K rows"
    script:
        "../scripts/make_dataset.py"


rule split:
    input:
        rows=rules.dataset.output.rows,
    output:
        heldout="results/data/heldout.jsonl",
        train="results/data/train.jsonl",
        sft="results/data/sft.jsonl",
        pretrain="results/data/pretrain.jsonl",
        stats="results/data/split_stats.json",
    log:
        "results/logs/split.log",
    benchmark:
        "results/benchmarks/split.tsv"
    conda:
        "../envs/pipeline.yaml"
    params:
        data=config["data"],
        train_sft=config["sft"]["source"] in ("train", "shipped"),  # shipped: to check the SFT set it read
    message:
        "Parsing gold answers and splitting with seed {config[data][shuffle_seed]}"
    script:
        "../scripts/split_data.py"
