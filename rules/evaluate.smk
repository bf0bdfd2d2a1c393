# Stages 5-6: n samples per held-out problem for each model, then pass@k with intervals, then results.json
# (once for the models of rule all, once more with the pitfall variants for rule pitfalls).


rule sample:
    input:
        unpack(lambda wildcards: adapter_of(wildcards.model)),
        base=rules.base_model.output.model,
        heldout=rules.split.output.heldout,
    output:
        samples="results/eval/{model}/samples.jsonl",
        sizes="results/eval/{model}/sizes.json",  # the batch size it ran with (auto: sized to its GPU)
    log:
        "results/logs/sample-{model}.log",
    benchmark:
        "results/benchmarks/sample-{model}.tsv"
    priority: lambda wildcards: sampling_priority(wildcards.model)  # base, SFT and GRPO (the headline) first
    conda:
        "../envs/pipeline.yaml"
    threads: JOB_THREADS  # one per job: two side by side beat one with two (rules/common.smk)
    resources:
        gpu=1,  # a model stage: one job per GPU, each on its own (profiles/default), side by side on a CPU
        runtime=120,  # minutes: 256 problems x 9 completions of up to 256 tokens (also pass@k's 100 x 65)
    params:
        eval=sample_settings,  # eval.seed, or a seed-study run's own sampling seed
        dtype=EVAL_DTYPE,
        system_prompt=SYSTEM,
    message:
        "Sampling {config[eval][num_samples]} completions per held-out problem from {wildcards.model}"
    script:
        "../scripts/sample_heldout.py"


rule score:
    input:
        samples=rules.sample.output.samples,
    output:
        scores="results/eval/{model}/scores.json",
    log:
        "results/logs/score-{model}.log",
    benchmark:
        "results/benchmarks/score-{model}.tsv"
    priority: lambda wildcards: scoring_priority(wildcards.model)
    conda:
        "../envs/pipeline.yaml"
    params:
        eval=EVAL_SETTINGS,
    message:
        "Scoring {wildcards.model}: unbiased pass@k, Wilson and bootstrap intervals"
    script:
        "../scripts/score_samples.py"


use rule sample as sample_own_temperature with:
    output:
        samples="results/eval/{model}/own_temperature/samples.jsonl",
        sizes="results/eval/{model}/own_temperature/sizes.json",
    log:
        "results/logs/sample_own_temperature-{model}.log",
    benchmark:
        "results/benchmarks/sample_own_temperature-{model}.tsv"
    params:
        eval=lambda wildcards: {**EVAL_SETTINGS, "temperature": training_temperature(wildcards.model)},
        dtype=EVAL_DTYPE,
        system_prompt=SYSTEM,
    message:
        "Sampling {wildcards.model} at the temperature it was trained at"


use rule score as score_own_temperature with:
    input:
        samples=rules.sample_own_temperature.output.samples,
    output:
        scores="results/eval/{model}/own_temperature/scores.json",
    log:
        "results/logs/score_own_temperature-{model}.log",
    benchmark:
        "results/benchmarks/score_own_temperature-{model}.tsv"
    message:
        "Scoring {wildcards.model} at the temperature it was trained at"


rule token_logprobs:
    input:
        base=rules.base_model.output.model,
        policy="results/runs/grpo/adapter",
        reference=rules.sft_adapter.output.adapter,
        samples="results/eval/grpo/samples.jsonl",
    output:
        logprobs="results/eval/grpo/token_logprobs.json",
    log:
        "results/logs/token_logprobs.log",
    benchmark:
        "results/benchmarks/token_logprobs.tsv"
    conda:
        "../envs/pipeline.yaml"
    threads: JOB_THREADS
    resources:
        gpu=1,
        runtime=60,
    params:
        system_prompt=SYSTEM,
        max_completions=256,
        chat_template_kwargs=EVAL_SETTINGS.get("chat_template_kwargs", {}),
        temperature=EVAL_SETTINGS.get("temperature", 1.0),  # the samples' own: both distributions at the temperature drawn at
        dtype=EVAL_DTYPE,
    message:
        "Per-token log-probs of GRPO's held-out samples under GRPO and SFT: KL(GRPO || SFT), k1 vs k3"
    script:
        "../scripts/token_logprobs.py"


rule results:
    input:
        unpack(lambda wildcards: scope_inputs("main")),
    output:
        results="results/results.json",
    log:
        "results/logs/results.log",
    conda:
        "../envs/pipeline.yaml"
    params:
        **scope_params("main"),
    message:
        "Collecting every stage's numbers into results/results.json"
    script:
        "../scripts/collect_results.py"


use rule results as results_pitfalls with:
    input:
        unpack(lambda wildcards: scope_inputs("pitfalls")),
    output:
        results="results/pitfalls/results.json",
    log:
        "results/logs/results-pitfalls.log",
    params:
        **scope_params("pitfalls"),
    message:
        "Collecting the methods and the pitfall variants into results/pitfalls/results.json"
