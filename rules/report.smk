# Stage 7: figures from the cached results, then one self-contained HTML page; once for the methods
# (rule all) and once more with the pitfall variants (rule pitfalls, under results/pitfalls/).


rule figures:
    input:
        results=rules.results.output.results,
    output:
        # report(): also in Snakemake's own report (`snakemake --report results/snakemake-report.html`)
        figures=report(
            directory("results/figures"),
            patterns=["{name}.png"],
            category="Figures",
            caption="../report/snakemake/figure.rst",
        ),
    log:
        "results/logs/figures.log",
    benchmark:
        "results/benchmarks/figures.tsv"
    conda:
        "../envs/pipeline.yaml"
    params:
        studies=optional_results("passk"),  # pass@k to 64, once `snakemake passk` built it (not an input: see common)
    message:
        "Drawing the report's figures"
    script:
        "../scripts/make_figures.py"


MAIN_REPORT_STUDIES = ("passk", "hacking", "seeds", "losses", "chains")


rule report:
    input:
        results=rules.results.output.results,
        figures=rules.figures.output.figures,
        samples=expand(rules.sample.output.samples, model=SCOPE_MODELS["main"]),
        template="report/template.html.j2",
        assets=["report/words.html.j2", "report/kl_verdict.html.j2", "report/style.css", "report/calculator.js"],
    output:
        html=report("results/report.html", category="Report", caption="../report/snakemake/report.rst"),
    log:
        "results/logs/report.log",
    conda:
        "../envs/pipeline.yaml"
    params:
        models=SCOPE_MODELS["main"],
        # pass@k to 64, the reward-hacking verdicts, the seed study's verdicts beside each row, the loss-family
        # study's and the chain study's verdicts, once built (params, not inputs: rules/common.smk OPTIONAL_RESULTS),
        # each marked when built from other settings than these
        studies=optional_results(*MAIN_REPORT_STUDIES),
        settings_fingerprint=fingerprint_while_built(*MAIN_REPORT_STUDIES),
        benchmarks=results_path("results/benchmarks"),  # every job's timing, for the elapsed wall time
    message:
        "Rendering results/report.html"
    script:
        "../scripts/render_report.py"


rule figures_pitfalls:  # the report's figures, and one per pitfall its variants' curves overlay
    input:
        results=rules.results_pitfalls.output.results,
    output:
        figures=report(
            directory("results/pitfalls/figures"),
            patterns=["{name}.png"],
            category="Pitfalls",
            caption="../report/snakemake/figure.rst",
        ),
    log:
        "results/logs/figures-pitfalls.log",
    benchmark:
        "results/benchmarks/figures-pitfalls.tsv"
    conda:
        "../envs/pipeline.yaml"
    message:
        "Drawing the figures of the pitfalls report"
    script:
        "../scripts/make_pitfall_figures.py"


use rule report as report_pitfalls with:
    input:
        results=rules.results_pitfalls.output.results,
        figures=rules.figures_pitfalls.output.figures,
        samples=expand(rules.sample.output.samples, model=SCOPE_MODELS["pitfalls"]),
        template="report/template.html.j2",
        assets=["report/words.html.j2", "report/kl_verdict.html.j2", "report/style.css", "report/calculator.js"],
    output:
        html="results/pitfalls/report.html",
    log:
        "results/logs/report-pitfalls.log",
    params:
        models=SCOPE_MODELS["pitfalls"],
    message:
        "Rendering results/pitfalls/report.html (methods and pitfall variants)"
