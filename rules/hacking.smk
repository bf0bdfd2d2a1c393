# The reward-hacking experiment (`snakemake --cores 2 hacking`): an SFT adapter that sometimes thinks briefly or
# not at all (hacking.sft), then the variants with group: hacking trained from it by the train rule under a short
# completion budget, one per format reward; their per-step records -> results/hacking/results.json -> report.

if config["sft"]["source"] in ("train", "shipped"):

    rule sft_adapter_brief:  # the SFT adapter's recipe (scripts/train_sft.py) with hacking.sft's brief thinks
        input:
            base=rules.base_model.output.model,
            sft=rules.split.output.sft,
        output:
            adapter=directory("results/model/sft_brief_think/adapter"),
            history="results/model/sft_brief_think/history.json",
        log:
            "results/logs/sft_adapter_brief.log",
        benchmark:
            "results/benchmarks/sft_adapter_brief.tsv"
        conda:
            "../envs/pipeline.yaml"
        threads: 1  # as every training job: 2 threads beside another job spin-wait (docs/findings.md)
        resources:
            gpu=1,
            runtime=60,
        params:
            sft=config["sft"],
            corpus=config["corpus"],
            brief_think=config["hacking"]["sft"],
            seed=config["seed"],
            system_prompt=SYSTEM,
            dtype=TRAIN_DTYPE,
            checkpoints=results_path("results/checkpoints/sft_brief_think"),
        message:
            "Training the brief thinkers' SFT adapter ({config[hacking][sft][empty_think_share]} empty, "
            "{config[hacking][sft][one_line_think_share]} one-line think blocks)"
        script:
            "../scripts/train_sft.py"


rule hacking_results:
    input:
        train=expand(rules.train.output.train, run=HACKING_VARIANTS),
        rollouts=expand(rules.train.output.rollouts, run=HACKING_VARIANTS),
    output:
        results="results/hacking/results.json",
    log:
        "results/logs/hacking_results.log",
    conda:
        "../envs/pipeline.yaml"
    params:
        settings_fingerprint=SETTINGS_FINGERPRINT,  # the settings it is built from, for the main report
        variants=HACKING_VARIANTS,
        plans={v: variant_plan(config, v) for v in HACKING_VARIANTS},
        sft_shares=config["hacking"]["sft"],
        detector=config["hacking"].get("detector", {}),
        benchmarks=results_path("results/benchmarks"),
    message:
        "Collecting the reward-hacking runs into results/hacking/results.json"
    script:
        "../scripts/collect_hacking.py"


rule hacking_report:
    input:
        unpack(optional_inputs("chains")),  # the hacking runs at every chain seed, once `snakemake chains` built them
        results=rules.hacking_results.output.results,
        template="report/hacking.html.j2",
        assets=["report/style.css"],
    output:
        figures=directory("results/hacking/figures"),
        html="results/hacking/report.html",
    log:
        "results/logs/hacking_report.log",
    conda:
        "../envs/pipeline.yaml"
    message:
        "Drawing the reward-hacking curves and rendering results/hacking/report.html"
    script:
        "../scripts/render_hacking.py"
