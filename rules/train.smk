# Stage 4: GRPO from the SFT adapter, one run per variant (the default config has one: grpo).


rule grpo:
    message: "GRPO run {wildcards.variant} with TRL's GRPOTrainer"
    input:
        base=rules.base_model.output.model,
        adapter=rules.sft_adapter.output.adapter,
        train=rules.split.output.train,
    output:
        adapter=directory("results/runs/{variant}/adapter"),
        train="results/runs/{variant}/train.json",
    params:
        settings=lambda wildcards: variant_settings(config, wildcards.variant),
        seed=config["seed"],
        system_prompt=SYSTEM,
        checkpoints=lambda wildcards: f"results/checkpoints/grpo-{wildcards.variant}",
    wildcard_constraints:
        variant="|".join(VARIANTS),
    threads: 2
    resources:
        gpu=1,  # `--resources gpu=1`: one model stage on the GPU at a time
    log:
        "results/logs/grpo-{variant}.log",
    benchmark:
        "results/benchmarks/grpo-{variant}.tsv"
    conda:
        "../envs/training.yaml"
    script:
        "../scripts/train_grpo.py"
