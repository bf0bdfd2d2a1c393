# Stages 5-6: n samples per held-out problem for each model, then pass@k with intervals, then results.json.


rule sample:
    message: "Sampling {config[eval][num_samples]} completions per held-out problem from {wildcards.model}"
    input:
        unpack(lambda wildcards: adapter_of(wildcards.model)),
        base=rules.base_model.output.model,
        heldout=rules.split.output.heldout,
    output:
        samples="results/eval/{model}/samples.jsonl",
    params:
        eval=config["eval"],
        dtype=config["base"].get("dtype", "float32"),
        system_prompt=SYSTEM,
    threads: 2
    resources:
        gpu=1,  # `--resources gpu=1`: one model stage on the GPU at a time
    log:
        "results/logs/sample-{model}.log",
    benchmark:
        "results/benchmarks/sample-{model}.tsv"
    conda:
        "../envs/training.yaml"
    script:
        "../scripts/sample_heldout.py"


rule score:
    message: "Scoring {wildcards.model}: unbiased pass@k, Wilson and bootstrap intervals"
    input:
        samples=rules.sample.output.samples,
    output:
        scores="results/eval/{model}/scores.json",
    params:
        eval=config["eval"],
    log:
        "results/logs/score-{model}.log",
    benchmark:
        "results/benchmarks/score-{model}.tsv"
    conda:
        "../envs/pipeline.yaml"
    script:
        "../scripts/score_samples.py"


rule results:
    message: "Collecting every stage's numbers into results/results.json"
    input:
        stats=rules.split.output.stats,
        scores=expand(rules.score.output.scores, model=EVAL_MODELS),
        train=expand(rules.grpo.output.train, variant=VARIANTS),
        base=rules.base_model.output.model,
    output:
        results="results/results.json",
    params:
        config=config,
        models=EVAL_MODELS,
        variants=VARIANTS,
        benchmarks="results/benchmarks",
    log:
        "results/logs/results.log",
    conda:
        "../envs/pipeline.yaml"
    script:
        "../scripts/collect_results.py"
