# Stage 5b: second held-out sets (eval.extra_sets, e.g. MGSM Thai), reported apart from the main one: each set
# becomes held-out rows without the problems a training set holds, then every model of eval.models is sampled
# and scored on it by the sample and score rules' own scripts and settings.


wildcard_constraints:
    extra=r"[A-Za-z0-9_]+",  # a set's name (config/schema.yaml): one folder level, so {model} after it is unambiguous


rule extra_heldout:
    input:
        train=rules.split.output.train,
        sft=rules.split.output.sft,
        pretrain=rules.split.output.pretrain,
    output:
        rows="results/data/extra/{extra}.jsonl",
        stats="results/data/extra/{extra}_stats.json",
    log:
        "results/logs/extra_heldout-{extra}.log",
    benchmark:
        "results/benchmarks/extra_heldout-{extra}.tsv"
    localrule: any(spec.get("source", "hub") == "hub" for spec in EXTRA_SETS.values())  # a download: login node
    conda:
        "../envs/pipeline.yaml"
    params:
        spec=lambda wildcards: EXTRA_SETS[wildcards.extra],
    message:
        "Loading the second held-out set {wildcards.extra}, without the problems a training set holds"
    script:
        "../scripts/extra_heldout.py"


use rule sample as sample_extra with:
    input:
        unpack(lambda wildcards: adapter_of(wildcards.model)),
        base=rules.base_model.output.model,
        heldout=rules.extra_heldout.output.rows,
    output:
        samples="results/eval_extra/{extra}/{model}/samples.jsonl",
        sizes="results/eval_extra/{extra}/{model}/sizes.json",
    log:
        "results/logs/sample_extra-{extra}-{model}.log",
    benchmark:
        "results/benchmarks/sample_extra-{extra}-{model}.tsv"
    message:
        "Sampling {config[eval][num_samples]} completions per problem of {wildcards.extra} from {wildcards.model}"


use rule score as score_extra with:
    input:
        samples=rules.sample_extra.output.samples,
    output:
        scores="results/eval_extra/{extra}/{model}/scores.json",
    log:
        "results/logs/score_extra-{extra}-{model}.log",
    benchmark:
        "results/benchmarks/score_extra-{extra}-{model}.tsv"
    message:
        "Scoring {wildcards.model} on {wildcards.extra}: unbiased pass@k, Wilson and bootstrap intervals"
