# The headline, SFT vs GRPO at pass@1, as soon as base, SFT and GRPO are scored: results/headline.json and one
# terminal line ("Headline ready: ..."), while the other methods still train (their jobs have lower priorities).

HEADLINE_MODELS = ["base", "sft", "grpo"]
# rule all's headline target: none when eval.models leaves out one of the three.
HEADLINE_TARGET = ["results/headline.json"] if set(HEADLINE_MODELS) <= set(EVAL_MODELS) else []


rule headline:
    input:
        scores=expand(rules.score.output.scores, model=HEADLINE_MODELS),
    output:
        headline="results/headline.json",
    log:
        "results/logs/headline.log",
    priority: HEADLINE_SCORING
    conda:
        "../envs/pipeline.yaml"
    params:
        models=HEADLINE_MODELS,
        eval=EVAL_SETTINGS,
    message:
        "SFT vs GRPO: the headline, before the other methods"
    script:
        "../scripts/headline.py"
