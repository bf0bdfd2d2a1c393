# The chain study (`snakemake --cores 2 chains`): the default comparison (SFT and every method of eval.models)
# rebuilt from whole chains, one per chains.seeds seed: base initialisation, data order, SFT and training all move
# with it, the data and held-out problems do not. The chain at the config's own seed is the main run (results/);
# every other chain is this workflow loaded again as a Snakemake module, config seed = the chain seed, eval.seed = the
# chain's own sampling seed (thai_grpo.core.seeds.chain_sampling_seed), its files under results/chains/seed<N>/
# (replace_prefix), its rules renamed chain_seed<N>_*. Then per pair of models the crossed analysis of chains and
# problems under the declared plan (config analysis:): results/chains/.

for chain_seed in CHAIN_SEEDS:
    if chain_seed == config["seed"]:
        continue
    chain_module = f"chain_seed{chain_seed}"
    chain_rules = f"chain_seed{chain_seed}_"

    module:
        name: chain_module
        snakefile:
            "../Snakefile"
        config:
            chain_config(chain_seed)
        replace_prefix:
            {"results/": f"{chain_dir(chain_seed)}/"}

    use rule * from chain_module as chain_rules*


rule chain_results:
    input:
        scores=[f"{chain_dir(s)}/eval/{m}/scores.json" for s in CHAIN_SEEDS for m in CHAIN_MODELS],
        hacking=[f"{chain_dir(s)}/hacking/results.json" for s in CHAIN_SEEDS],
        heldout=[f"{chain_dir(s)}/data/heldout.jsonl" for s in CHAIN_SEEDS],
    output:
        results=CHAINS_RESULTS,
    log:
        "results/logs/chain_results.log",
    conda:
        "../envs/pipeline.yaml"
    params:
        settings_fingerprint=SETTINGS_FINGERPRINT,  # the settings it is built from, for the main report
        seeds=CHAIN_SEEDS,
        models=CHAIN_MODELS,
        default_seed=config["seed"],
        n_boot=config["eval"]["bootstrap_samples"],
        eval_seed=config["eval"]["seed"],
        sampling_seeds={s: chain_sampling_seed(config["eval"]["seed"], s, config["seed"]) for s in CHAIN_SEEDS},
        analysis=config.get("analysis", {}),
        benchmarks={s: results_path(f"{chain_dir(s)}/benchmarks") for s in CHAIN_SEEDS},
    message:
        "Chain study: per pair of models the crossed analysis of chains and problems, under the declared plan"
    script:
        "../scripts/chain_results.py"
