# The large-k experiment (`snakemake --cores 2 passk`, not in the default run): the sample and score rules again,
# with n = passk.num_samples completions on the first passk.problems held-out problems, then pass@k for k = 1..n
# with bands, the SFT-GRPO crossing and the problems created or lost, in results/passk/results.json.


use rule sample as sample_passk with:
    output:
        samples="results/passk/{model}/samples.jsonl",
        sizes="results/passk/{model}/sizes.json",
    log:
        "results/logs/sample_passk-{model}.log",
    benchmark:
        "results/benchmarks/sample_passk-{model}.tsv"
    params:
        eval=PASSK_SETTINGS,
        dtype=EVAL_DTYPE,
        system_prompt=SYSTEM,
    message:
        "Sampling {params.eval[num_samples]} completions per problem on {params.eval[problems]} held-out problems "
        "from {wildcards.model} (pass@k to large k)"


use rule score as score_passk with:
    input:
        samples=rules.sample_passk.output.samples,
    output:
        scores="results/passk/{model}/scores.json",
    log:
        "results/logs/score_passk-{model}.log",
    benchmark:
        "results/benchmarks/score_passk-{model}.tsv"
    params:
        eval=PASSK_SETTINGS,
    message:
        "Scoring {wildcards.model}'s large-k samples"


rule passk_results:
    input:
        scores=expand(rules.score_passk.output.scores, model=PASSK_MODELS),
    output:
        results="results/passk/results.json",
        figure="results/passk/pass_at_k_large.png",  # copied into the main report's figures once built
    log:
        "results/logs/passk_results.log",
    conda:
        "../envs/pipeline.yaml"
    params:
        settings_fingerprint=SETTINGS_FINGERPRINT,  # the settings it is built from, for the main report
        models=PASSK_MODELS,
        eval=PASSK_SETTINGS,
        benchmarks=results_path("results/benchmarks"),
    message:
        "pass@k to k = {params.eval[num_samples]}: bands, the SFT-GRPO crossing, problems created and lost"
    script:
        "../scripts/passk_results.py"
