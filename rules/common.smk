# Helpers the rule files share (config lookups, which models each report covers, input functions).

import os
import sys

from thai_grpo.jobs.devices import JOBS_PER_GPU_ENV, jobs_per_card, local_gpu_count
from thai_grpo.core.config import ConfigError
from thai_grpo.core.seeds import chain_sampling_seed, parse_run, run_pattern
from thai_grpo.data.prompts import SYSTEM_PROMPT
from thai_grpo.workflow import (
    LOSS_BASELINE,
    checked_config,
    eval_settings,
    loss_runs,
    passk_settings,
    recipe,
    run_eval_settings,
    seed_runs,
    settings_fingerprint,
    variant_plan,
)

try:  # the schema's checks, then every key of every method section by the checked-in TRL field names (no TRL import)
    config.update(checked_config(config, os.path.join(workflow.basedir, "config", "schema.yaml")))
except ConfigError as error:
    sys.exit(f"config error: {error}")

# Threads and priorities: every job takes one thread (two one-thread jobs side by side do more per core-second than
# one with two); priorities only order the jobs, the headline (SFT vs GRPO) first, then the run's longest chain. Neither
# changes a number.
JOB_THREADS = 1
CORE_CHAIN = ("base", "sft", "grpo")
CHAIN_TRAINING = 40  # base, SFT, GRPO's training: the headline's longest path
HEADLINE_SAMPLING = 30  # sampling base, SFT and GRPO
HEADLINE_SCORING = 10  # scoring them, and the headline itself
LONGEST_CHAIN = 5  # preference pairs -> reward model -> PPO's training: the run's critical path
OTHER_TRAINING = 1  # the other methods' runs: long, so before the short jobs that can wait
REST = 0


def training_priority(run, method):
    """Priority of the training job of run ``run`` (a variant or a seed-study run) of ``method``."""
    if run in CORE_CHAIN:
        return CHAIN_TRAINING
    return LONGEST_CHAIN if method == "ppo" else OTHER_TRAINING


def sampling_priority(model):
    return HEADLINE_SAMPLING if model in CORE_CHAIN else REST


def scoring_priority(model):
    return HEADLINE_SCORING if model in CORE_CHAIN else REST


# How many model jobs share one card (`--resources gpu=K` over the GPUs present): each sizes its `auto` batches to its
# share (thai_grpo.jobs.memory_stages.card_gib_of). Local jobs inherit this process's environment.
os.environ.setdefault(
    JOBS_PER_GPU_ENV,
    str(jobs_per_card(getattr(workflow.global_resources.get("gpu"), "value", None), local_gpu_count())),
)

# Where this pipeline's outputs live. Rules name their files under results/; the chain study (rules/chains.smk) loads
# the whole workflow again per chain as a Snakemake module whose replace_prefix maps results/ to the chain's folder
# (inputs, outputs, logs, benchmarks) and whose config sets results_dir to the same folder, for the paths Snakemake
# does not map: params (checkpoint folders, benchmarks) and existence checks, which go through results_path.
RESULTS_DIR = config.get("results_dir", "results")


def results_path(path):
    """``path``, named under results/, in this pipeline's results folder (``results_dir``)."""
    if not (path == "results" or path.startswith("results/")):
        raise ValueError(f"results_path({path!r}): name the path under results/")
    return RESULTS_DIR + path[len("results") :]


SYSTEM = config["data"].get("system_prompt", SYSTEM_PROMPT)
# base.source: shipped loads the base and SFT adapter from this folder, once its built_by.json matches this recipe
# (the seed, base:, corpus:, sft:, the system prompt) and the data (thai_grpo.core.shipped, scripts/load_shipped.py).
SHIPPED_DIR = config["base"].get("name_or_path") or "assets/tiny-base"
SHIPPED_RECIPE = recipe(config, SYSTEM)
VARIANTS = list(config["variants"])
EVAL_MODELS = config["eval"]["models"]
PITFALL_VARIANTS = [v for v in VARIANTS if config["variants"][v].get("group", "method") in ("pitfall", "ablation")]
# The models each report covers: `snakemake` (rule all) eval.models; `snakemake pitfalls` those plus every
# variant with group: pitfall or ablation. Each scope has its own results.json, figures and report.html.
SCOPE_MODELS = {"main": EVAL_MODELS, "pitfalls": EVAL_MODELS + [v for v in PITFALL_VARIANTS if v not in EVAL_MODELS]}
# Sampling and scoring settings (thai_grpo.workflow.eval_settings): adding a model to eval.models resamples no
# other model, adding a second held-out set resamples nothing on the main one.
EVAL_SETTINGS = eval_settings(config)
# Every evaluation stage's precision (eval.dtype); every training stage loads its frozen weights in base.dtype.
EVAL_DTYPE = config["eval"]["dtype"]
TRAIN_DTYPE = config["base"]["dtype"]
# The large-k experiment (the passk rule) samples as eval does, with n = passk.num_samples on the first passk.problems.
PASSK_SETTINGS = passk_settings(config)
PASSK_MODELS = config["passk"]["models"]
# Second held-out sets (eval.extra_sets, e.g. MGSM Thai): every model of eval.models is evaluated on each.
EXTRA_SETS = config["eval"].get("extra_sets") or {}


def training_temperature(variant):
    """The temperature a variant's training samples were drawn at: its grpo section's, its ppo section's for PPO, and
    for DPO the preference pairs' (grpo's: rule preference_pairs)."""
    plan = variant_plan(config, variant)
    if plan["method"] == "dpo":
        return config["grpo"]["temperature"]
    return plan["ppo"].get("temperature", plan["grpo_args"]["temperature"])  # PPO samples as GRPO does unless told


# Every model is scored at eval.temperature; a variant trained at another temperature (the temp0.3 pitfall) is
# also scored at its own, so that its report shows both.
OWN_TEMPERATURE = {
    scope: [m for m in models if m in VARIANTS and training_temperature(m) != EVAL_SETTINGS["temperature"]]
    for scope, models in SCOPE_MODELS.items()
}


wildcard_constraints:
    model="[^/]+",


# The seed study (`snakemake seeds`): per RL method variant, one run per training seed (thai_grpo.workflow.seed_runs); the run
# at the config's seed is the variant's own run, the others are `<variant>-seed<N>`.
SEED_RUNS = seed_runs(config)
SEED_STUDY_RESULTS = "results/seeds/results.json"


def sample_settings(wildcards):
    """A params function: the eval settings of the model or run being sampled (a seed-study run gets its own
    sampling seed, thai_grpo.core.seeds.sampling_seed; every other model samples at eval.seed)."""
    return run_eval_settings(EVAL_SETTINGS, wildcards.model, VARIANTS, config["seed"])


def variant_of(run):
    """The variant a run id (``grpo``, ``grpo-seed1``) trains."""
    return parse_run(run, VARIANTS, config["seed"])[0]


def trained(models):
    """The variants among ``models`` (base and sft are not trained by the train rule)."""
    return [m for m in models if m in VARIANTS]


def method_of(variant):
    return config["variants"][variant].get("method", "grpo")


def adapter_of(model):
    """The adapter folder a held-out model samples with; the bare base has none."""
    if model == "base":
        return {}
    if model == "sft":
        return {"adapter": "results/model/sft_adapter"}
    return {"adapter": f"results/runs/{model}/adapter"}


def uses_reward_model(variant):
    """A PPO variant scored by the learned reward model (not ``ppo: {score: verifier}``)."""
    overrides = config["variants"][variant]
    return method_of(variant) == "ppo" and overrides.get("ppo", {}).get("score", "reward_model") == "reward_model"


def train_inputs(wildcards):
    """A DPO variant also reads the preference pairs, a PPO one the reward model (its score and its value model's
    start) unless the verifier scores it; GRPO and RLOO sample their own completions."""
    variant = variant_of(wildcards.run)
    if method_of(variant) == "dpo":
        return {"pairs": rules.preference_pairs.output.pairs}
    return {"reward_model": rules.reward_model.output.model} if uses_reward_model(variant) else {}


def scope_inputs(scope):
    """Inputs of one scope's results rule: its models' scores and training records (and pair counts for DPO)."""
    models = SCOPE_MODELS[scope]
    files = {
        "stats": rules.split.output.stats,
        "base": rules.base_model.output.model,
        "scores": expand(rules.score.output.scores, model=models),
        "sizes": expand(rules.sample.output.sizes, model=models),  # the batch size each sampling job ran with
        "train": expand(rules.train.output.train, run=trained(models)),
        # every rollout of each run and the training problems: each stored group's rewards by name and gold answer
        "rollouts": expand(rules.train.output.rollouts, run=trained(models)),
        "train_rows": rules.split.output.train,
        # the update size of each run: ||adapter - SFT adapter|| (thai_grpo.analyses.update_size)
        "adapters": expand(rules.train.output.adapter, run=trained(models)),
        "sft_adapter": rules.sft_adapter.output.adapter,
    }
    if any(method_of(v) in ("dpo", "ppo") for v in trained(models)):
        files["pairs"] = rules.preference_pairs.output.stats
    if any(uses_reward_model(v) for v in trained(models)):
        files["reward_model"] = rules.reward_model_accuracy.output.accuracy
        files["reward_model_train"] = rules.reward_model.output.train  # its arguments, for the run card
    if "grpo" in models:
        files["kl_real"] = "results/eval/grpo/token_logprobs.json"
    if OWN_TEMPERATURE[scope]:
        files["own_temperature"] = expand(rules.score_own_temperature.output.scores, model=OWN_TEMPERATURE[scope])
    if EXTRA_SETS:  # collect_results reads the scores set by set, model by model in eval.models order
        files["extra_stats"] = expand(rules.extra_heldout.output.stats, extra=list(EXTRA_SETS))
        files["extra_scores"] = expand(rules.score_extra.output.scores, extra=list(EXTRA_SETS), model=EVAL_MODELS)
    return files


# The optional targets' results (snakemake passk / hacking / seeds / losses / chains) that the main figures and report
# show once built; absent, the report says how to build each. They are params (path and digest), not inputs: a plain
# `snakemake` never schedules a study's jobs, even after a knob change that makes the study out of date (the report
# then marks it as built from other settings, SETTINGS_FINGERPRINT; its own target rebuilds it), and after one of
# those targets it redraws or rerenders just what reads the new results.
OPTIONAL_RESULTS = {
    "passk": "results/passk/results.json",
    "hacking": "results/hacking/results.json",
    "seeds": SEED_STUDY_RESULTS,
    "chains": "results/chains/results.json",
    "losses": "results/losses/results.json",
}


def fingerprint_while_built(*names):
    """A params function: SETTINGS_FINGERPRINT while one of the studies ``names`` is built (a config change then
    rerenders what shows it, whose mark may change), else empty (no study shown, nothing to rerender)."""
    built = optional_results(*names)
    return lambda wildcards: SETTINGS_FINGERPRINT if built(wildcards) else ""


def optional_inputs(*names):
    """An input function: the results files among ``names`` that exist now (for a study's own report, whose target
    rebuilds what it reads)."""
    return lambda wildcards: {
        name: OPTIONAL_RESULTS[name] for name in names if os.path.exists(results_path(OPTIONAL_RESULTS[name]))
    }


# The settings this config builds from (thai_grpo.workflow.settings_fingerprint): each study's results store it.
SETTINGS_FINGERPRINT = settings_fingerprint(config)


def file_digest(path):
    import hashlib

    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def optional_results(*names):
    """A params function: {name: {"path", "sha256"}} of the results files among ``names`` (keys of OPTIONAL_RESULTS)
    that exist now; the digest reruns the reader when a study is rebuilt."""
    paths = {name: results_path(OPTIONAL_RESULTS[name]) for name in names}
    return lambda wildcards: {
        name: {"path": path, "sha256": file_digest(path)} for name, path in paths.items() if os.path.exists(path)
    }


def scope_params(scope):
    """Params of one scope's results rule: the config (with this scope's variants only, so editing a variant
    the scope does not show leaves it alone), the models, and each trained variant's plan."""
    models = SCOPE_MODELS[scope]
    variants = {v: config["variants"][v] for v in trained(models)}
    plans = {v: {**variant_plan(config, v), "overrides": variants[v]} for v in variants}
    return {
        "config": {**config, "variants": variants},
        "models": models,
        "variants": list(variants),
        "plans": plans,
        "benchmarks": results_path("results/benchmarks"),
        "extra_sets": list(EXTRA_SETS),
        "own_temperature": OWN_TEMPERATURE[scope],
        "extra_models": EVAL_MODELS,
    }


# The reward-hacking experiment (rules/hacking.smk): its variants, and where every variant starts from.
HACKING_VARIANTS = [v for v in VARIANTS if config["variants"][v].get("group", "method") == "hacking"]


def start_adapter(variant):
    """The adapter a variant starts from (variants.X.start): the SFT adapter, or the brief thinkers' one."""
    if config["variants"][variant].get("start", "sft") == "sft":
        return rules.sft_adapter.output.adapter
    if config["sft"]["source"] not in ("train", "shipped"):
        raise WorkflowError(
            f"variants.{variant}.start: brief_think trains its own SFT adapter, which needs "
            "sft.source: train (a downloaded adapter cannot be retrained here); use start: sft"
        )
    return rules.sft_adapter_brief.output.adapter


# The chain study (rules/chains.smk): its chain seeds, where each chain lives, and the config of its module.
CHAIN_SEEDS = [int(s) for s in config.get("chains", {}).get("seeds", [])]
CHAINS_RESULTS = OPTIONAL_RESULTS["chains"]
# The models compared across chains (chains.models): SFT and trained methods (the bare base is no method).
CHAIN_MODELS = config.get("chains", {}).get("models") or ["sft"] + trained(EVAL_MODELS)


def chain_dir(seed):
    """The results folder of the chain at ``seed``: results/ for the config's own, else results/chains/seed<N>."""
    return "results" if seed == config["seed"] else f"results/chains/seed{seed}"


def chain_config(seed):
    """The config of a chain's module: this one at another seed, with its own results folder, held-out sampling seed
    (thai_grpo.core.seeds.chain_sampling_seed) and no chain study; its base and SFT adapter built from scratch (a
    shipped pair was built at the config's own seed)."""
    member = {key: value for key, value in config.items() if key != "chains"}
    if config["base"]["source"] == "shipped":
        member.update(base={**config["base"], "source": "scratch"}, sft={**config["sft"], "source": "train"})
    eval_seed = chain_sampling_seed(config["eval"]["seed"], seed, config["seed"])  # the chain's own stream
    return {**member, "seed": seed, "results_dir": chain_dir(seed), "eval": {**config["eval"], "seed": eval_seed}}


def slurm_check():
    """Under the SLURM executor (profiles/slurm), before the first sbatch: stop in one line where a job can never
    start, because no node of the partition the plugin sends it to holds what it asks for; Slurm would leave it
    pending or refuse it without naming the resource (thai_grpo.jobs.slurm_fit). Where ``sinfo`` does not answer,
    the plugin's own errors say why."""
    if workflow.executor_plugin is None or workflow.executor_plugin.name != "slurm":
        return
    import logging
    import subprocess
    from pathlib import Path
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.partitions import get_best_partition, read_partition_file
    from thai_grpo.jobs.slurm_fit import SINFO_FORMAT, partition_nodes, refusal, request

    try:
        sinfo = subprocess.run(["sinfo", "-h", "-N", "-o", SINFO_FORMAT], capture_output=True, text=True)
    except OSError:
        return
    if sinfo.returncode != 0:
        return
    nodes, default = partition_nodes(sinfo.stdout)
    partition_file = workflow.executor_settings.partition_config or os.environ.get("SNAKEMAKE_SLURM_PARTITIONS")
    partitions = read_partition_file(Path(partition_file)) if partition_file else []
    quiet = logging.getLogger("slurm_check")  # get_best_partition's per-job lines: the plugin prints them at sbatch
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False

    def partition_of(job, known):
        """The plugin's own choice (its get_partition_arg): the job's slurm_partition, else the best fit in the
        profile's partition file, else the cluster's default partition (None: sbatch's)."""
        if known.get("slurm_partition"):
            return known["slurm_partition"]
        job_now = SimpleNamespace(resources=known, threads=job.threads, name=job.name)
        return (get_best_partition(partitions, job_now, quiet) if partitions else None) or default

    for job in workflow.dag.needrun_jobs():
        if job.is_local:
            continue
        # what is known before the job's inputs exist (a size-based default waits for them, and is none of these)
        known = {key: value for key, value in job.resources.items() if type(value).__name__ != "TBDString"}
        partition = partition_of(job, known)
        line = partition and refusal(job.rule.name, partition, request(known, job.threads), nodes.get(partition, []))
        if line:
            sys.exit(f"slurm: {line}")
