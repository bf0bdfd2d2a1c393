# Stage 4: every variant trained from the SFT adapter, by its method: GRPO, RLOO (both sample their own
# completions) or DPO (on preference pairs sampled once from the SFT policy). One rule, `train`, whatever the
# method; the variant's plan is its params and holds only what its trainer reads (thai_grpo.methods.variant_plan:
# GRPO and RLOO the merged grpo section and the rewards, DPO its dpo: section and grpo's bookkeeping fields, PPO its
# ppo: section and grpo's temperature, completion budget and KL reference), so editing one variant reruns that
# variant alone, and a grpo knob such as beta reruns the GRPO family, not DPO nor PPO. The wildcard is a run id: the
# variant, trained at the config's seed, or `<variant>-seed<N>`, the same variant at training seed N (rules/seeds.smk).


rule preference_pairs:
    input:
        base=rules.base_model.output.model,
        adapter=rules.sft_adapter.output.adapter,
        train=rules.split.output.train,
    output:
        pairs="results/data/preference_pairs.jsonl",
        stats="results/data/preference_pairs_stats.json",
    log:
        "results/logs/preference_pairs.log",
    benchmark:
        "results/benchmarks/preference_pairs.tsv"
    priority: LONGEST_CHAIN  # it unblocks PPO's reward model, and PPO, the longest job (and DPO)
    conda:
        "../envs/pipeline.yaml"
    threads: JOB_THREADS
    resources:
        gpu=1,  # a model stage: one job per GPU, each on its own (profiles/default), side by side on a CPU
        runtime=60,
    params:
        # GRPO's rollout settings, a real dependency: DPO ranks the same kind of samples GRPO starts from (n =
        # num_generations), so these three grpo knobs rerun the pairs, and with them DPO and PPO's reward model.
        sampling={
            "num_samples": config["grpo"]["num_generations"],
            "temperature": config["grpo"]["temperature"],
            "max_new_tokens": config["grpo"]["max_completion_length"],
            "batch_size": config["eval"]["batch_size"],
            "seed": config["seed"],
            "chat_template_kwargs": config["eval"]["chat_template_kwargs"],
        },
        dtype=EVAL_DTYPE,  # the SFT policy samples as the evaluation does
        system_prompt=SYSTEM,
    message:
        "Sampling the SFT policy on the training problems; pairs of a correct and a wrong answer for DPO"
    script:
        "../scripts/preference_pairs.py"


rule train:
    input:
        unpack(train_inputs),
        base=rules.base_model.output.model,
        adapter=lambda wildcards: start_adapter(variant_of(wildcards.run)),  # the SFT adapter, or variants.X.start's
        train=rules.split.output.train,
    output:
        adapter=directory("results/runs/{run}/adapter"),
        train="results/runs/{run}/train.json",
        rollouts="results/runs/{run}/rollouts.jsonl",  # every rollout of a GRPO, RLOO or PPO run (DPO samples none)
    log:
        "results/logs/train-{run}.log",
    benchmark:
        "results/benchmarks/train-{run}.tsv"
    wildcard_constraints:
        run=run_pattern(VARIANTS),
    priority: lambda wildcards: training_priority(wildcards.run, method_of(variant_of(wildcards.run)))
    conda:
        "../envs/pipeline.yaml"
    threads: JOB_THREADS
    resources:
        gpu=1,
        runtime=240,  # minutes: GRPO takes the chapter ~18 min on a T4, PPO (four models, 16 rollout batches) the longest
    params:
        plan=lambda wildcards: variant_plan(config, variant_of(wildcards.run)),
        method=lambda wildcards: method_of(variant_of(wildcards.run)),
        seed=lambda wildcards: parse_run(wildcards.run, VARIANTS, config["seed"])[1],
        system_prompt=SYSTEM,
        dtype=TRAIN_DTYPE,
        training=config["training"],
        checkpoints=lambda wildcards: results_path(
            f"results/checkpoints/{method_of(variant_of(wildcards.run))}-{wildcards.run}"
        ),
    message:
        "Training run {wildcards.run} ({params.method}, seed {params.seed}) from the SFT adapter"
    script:
        "../scripts/train.py"
