# Stage 5b: second held-out sets (eval.extra_sets, e.g. MGSM Thai), reported apart from the main one: each set
# becomes held-out rows without the problems a training set holds, then every model of eval.models is sampled
# and scored on it by the sample and score rules' own scripts and settings.


wildcard_constraints:
    extra=r"[A-Za-z0-9_]+",  # a set's name (config/schema.yaml): one folder level, so {model} after it is unambiguous


rule extra_heldout:
    message: "Loading the second held-out set {wildcards.extra}, without the problems a training set holds"
    input:
        train=rules.split.output.train,
        sft=rules.split.output.sft,
        pretrain=rules.split.output.pretrain,
    output:
        rows="results/data/extra/{extra}.jsonl",
        stats="results/data/extra/{extra}_stats.json",
    params:
        spec=lambda wildcards: EXTRA_SETS[wildcards.extra],
    localrule: any(spec.get("source", "hub") == "hub" for spec in EXTRA_SETS.values())  # a download: login node
    log:
        "results/logs/extra_heldout-{extra}.log",
    benchmark:
        "results/benchmarks/extra_heldout-{extra}.tsv"
    conda:
        "../envs/pipeline.yaml"
    script:
        "../scripts/extra_heldout.py"


use rule sample as sample_extra with:
    message:
        "Sampling {config[eval][num_samples]} completions per problem of {wildcards.extra} from {wildcards.model}"
    input:
        unpack(lambda wildcards: adapter_of(wildcards.model)),
        base=rules.base_model.output.model,
        heldout=rules.extra_heldout.output.rows,
    output:
        samples="results/eval_extra/{extra}/{model}/samples.jsonl",
    log:
        "results/logs/sample_extra-{extra}-{model}.log",
    benchmark:
        "results/benchmarks/sample_extra-{extra}-{model}.tsv"


use rule score as score_extra with:
    message:
        "Scoring {wildcards.model} on {wildcards.extra}: unbiased pass@k, Wilson and bootstrap intervals"
    input:
        samples=rules.sample_extra.output.samples,
    output:
        scores="results/eval_extra/{extra}/{model}/scores.json",
    log:
        "results/logs/score_extra-{extra}-{model}.log",
    benchmark:
        "results/benchmarks/score_extra-{extra}-{model}.tsv"
