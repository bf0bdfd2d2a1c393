# Stage 4 (PPO only): the reward model PPO maximises, trained with TRL's RewardTrainer on the preference pairs
# (ranked by the verifier, not by people), and its pairwise accuracy on pairs built the same way from the SFT
# policy's held-out samples (evaluation only: PPO never waits for it).


rule reward_model:
    input:
        base=rules.base_model.output.model,
        pairs=rules.preference_pairs.output.pairs,
    output:
        model=directory("results/model/reward_model"),
        train="results/model/reward_model.json",
    log:
        "results/logs/reward_model.log",
    benchmark:
        "results/benchmarks/reward_model.tsv"
    priority: LONGEST_CHAIN  # PPO, the longest training job, waits for it
    conda:
        "../envs/pipeline.yaml"
    threads: JOB_THREADS
    resources:
        gpu=1,
        runtime=60,
    params:
        reward_model=config.get("reward_model", {}),
        lora=config.get("reward_model", {}).get("lora") or config["sft"].get("lora"),
        seed=config["seed"],
        chat_template_kwargs=EVAL_SETTINGS.get("chat_template_kwargs", {}),
        dtype=TRAIN_DTYPE,
        training=config["training"],
        checkpoints=results_path("results/checkpoints/reward_model"),
    message:
        "Training PPO's reward model (Bradley-Terry, LoRA + score head) on the preference pairs"
    script:
        "../scripts/train_reward_model.py"


rule reward_model_accuracy:
    input:
        base=rules.base_model.output.model,
        model=rules.reward_model.output.model,
        train=rules.reward_model.output.train,
        pairs=rules.preference_pairs.output.pairs,
        heldout=expand(rules.sample.output.samples, model="sft")[0],
    output:
        accuracy="results/eval/reward_model/accuracy.json",
    log:
        "results/logs/reward_model_accuracy.log",
    benchmark:
        "results/benchmarks/reward_model_accuracy.tsv"
    conda:
        "../envs/pipeline.yaml"
    threads: JOB_THREADS
    resources:
        gpu=1,
        runtime=30,
    params:
        system_prompt=SYSTEM,
        chat_template_kwargs=EVAL_SETTINGS.get("chat_template_kwargs", {}),
        dtype=EVAL_DTYPE,
    message:
        "Pairwise accuracy of the reward model on training pairs and on held-out pairs from SFT's samples"
    script:
        "../scripts/reward_model_accuracy.py"
