# The loss-family study (`snakemake --cores 2 losses`): every variant with group: losses trained from the SFT adapter
# at each seeds.training seed by the train, sample and score rules (run ids `<variant>-seed<N>`, the config's seed is
# the bare variant), beside grpo at the same seeds (the seed study's runs, not retrained when built); then each
# variant against grpo, paired by seed under the declared plan (config analysis:): results/losses/.

LOSS_STUDY = [
    (variant, run, parse_run(run, VARIANTS, config["seed"])[1])
    for variant, runs in loss_runs(config).items()
    for run in runs
]


rule loss_results:
    input:
        scores=[f"results/eval/{run}/scores.json" for _, run, _ in LOSS_STUDY],
        train=[f"results/runs/{run}/train.json" for _, run, _ in LOSS_STUDY],
    output:
        results=OPTIONAL_RESULTS["losses"],
    log:
        "results/logs/loss_results.log",
    benchmark:
        "results/benchmarks/loss_results.tsv"
    conda:
        "../envs/pipeline.yaml"
    params:
        settings_fingerprint=SETTINGS_FINGERPRINT,  # the settings it is built from, for the main report
        runs=LOSS_STUDY,
        baseline=LOSS_BASELINE,
        plans={
            v: {**variant_plan(config, v), "description": config["variants"][v].get("description", "")}
            for v in loss_runs(config)
        },
        analysis=config.get("analysis", {}),
        benchmarks="results/benchmarks",
    message:
        "Loss-family study: each variant against grpo at every training seed, seed as block (Dunnett)"
    script:
        "../scripts/loss_results.py"


rule loss_report:
    input:
        results=rules.loss_results.output.results,
        template="report/losses.html.j2",
        assets=["report/style.css"],
    output:
        figures=directory("results/losses/figures"),
        html="results/losses/report.html",
    log:
        "results/logs/loss_report.log",
    conda:
        "../envs/pipeline.yaml"
    message:
        "Drawing the loss-family curves and rendering results/losses/report.html"
    script:
        "../scripts/render_losses.py"
