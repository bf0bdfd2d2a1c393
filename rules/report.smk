# Stage 7: figures from the cached results, then one self-contained HTML page.


rule figures:
    message: "Drawing the report's figures"
    input:
        results=rules.results.output.results,
    output:
        figures=directory("results/figures"),
    log:
        "results/logs/figures.log",
    benchmark:
        "results/benchmarks/figures.tsv"
    conda:
        "../envs/pipeline.yaml"
    script:
        "../scripts/make_figures.py"


rule report:
    message: "Rendering results/report.html"
    input:
        results=rules.results.output.results,
        figures=rules.figures.output.figures,
        samples=expand(rules.sample.output.samples, model=EVAL_MODELS),
        template="report/template.html.j2",
        assets=["report/style.css", "report/calculator.js"],
    output:
        html="results/report.html",
    params:
        models=EVAL_MODELS,
    log:
        "results/logs/report.log",
    conda:
        "../envs/pipeline.yaml"
    script:
        "../scripts/render_report.py"
