# The seed study (`snakemake --cores 2 seeds`): every RL method variant (group: method, all but DPO) trained at
# each seeds.training seed by the same train, sample and score rules (run ids `<variant>-seed<N>`; the config's
# seed is the variant's existing run), then per method the spread over seeds and each method against grpo, paired by
# seed under the declared plan (config analysis:): results/seeds/results.json and results/seeds/report.html.

SEED_STUDY = [
    (variant, run, parse_run(run, VARIANTS, config["seed"])[1]) for variant, runs in SEED_RUNS.items() for run in runs
]


rule seed_results:
    input:
        scores=[f"results/eval/{run}/scores.json" for _, run, _ in SEED_STUDY],
    output:
        results=SEED_STUDY_RESULTS,
    log:
        "results/logs/seed_results.log",
    benchmark:
        "results/benchmarks/seed_results.tsv"
    conda:
        "../envs/pipeline.yaml"
    params:
        settings_fingerprint=SETTINGS_FINGERPRINT,  # the settings it is built from, for the main report
        runs=SEED_STUDY,
        seeds=config.get("seeds", {}).get("training", [config["seed"]]),
        default_seed=config["seed"],
        eval_seed=config["eval"]["seed"],
        sampling_seeds=[
            run_eval_settings(EVAL_SETTINGS, run, VARIANTS, config["seed"])["seed"] for _, run, _ in SEED_STUDY
        ],
        analysis=config.get("analysis", {}),
        benchmarks=results_path("results/benchmarks"),
    message:
        "Seed study: pass@1 per training seed, and each method against grpo with seed as block (Dunnett)"
    script:
        "../scripts/seed_results.py"


use rule report as report_seeds with:
    input:
        results=rules.results.output.results,
        figures=rules.figures.output.figures,
        samples=expand(rules.sample.output.samples, model=SCOPE_MODELS["main"]),
        template="report/template.html.j2",
        assets=["report/words.html.j2", "report/kl_verdict.html.j2", "report/style.css", "report/calculator.js"],
        seeds=rules.seed_results.output.results,
    output:
        html="results/seeds/report.html",
    log:
        "results/logs/report-seeds.log",
    message:
        "Rendering results/seeds/report.html (the report with the seed study's verdicts)"
