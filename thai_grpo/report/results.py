"""Assembling ``results/results.json``: the run card, per-step training metrics, held-out scores, comparison."""

from __future__ import annotations

import csv
import importlib.metadata
import json
import platform
from collections import Counter
from pathlib import Path

from thai_grpo.analyses.chapter import FACTS, TRAIN_SIZE, run_card_departures
from thai_grpo.evaluation.narrowing import narrowing_test
from thai_grpo.jobs.machine import JOB_MACHINE
from thai_grpo.evaluation.plan import analysis_plan
from thai_grpo.evaluation.scoring import paired_test, pairwise_tests
from thai_grpo.analyses.health import training_health
from thai_grpo.analyses.kl import real_kl_summary
from thai_grpo.analyses.update_size import mean_grad_norm

VERIFIER = "none: a verifier (code) grades"
SHARED_BASE = "2 (policy, reference; one shared base with LoRA)"

# What each method needs, from the chapter's comparison (read right to left: labels go to zero).
METHODS = {
    "base": ("Base (no adapter)", "none", "1 (base)"),
    "sft": ("SFT", "one reference solution per example", "1 (base + LoRA)"),
    "ppo": ("PPO", "preference pairs -> reward model; here ranked by the verifier from the SFT model's own samples, "
                   "so no human labels", "4 (policy, reference, reward model, value model: separate copies here)"),
    "dpo": ("DPO", "preference pairs (chosen / rejected); here ranked by the verifier from the SFT model's own "
                   "samples, so no human labels", SHARED_BASE),
    "grpo": ("GRPO", VERIFIER, SHARED_BASE),
    "dr_grpo": ("Dr.GRPO", VERIFIER, SHARED_BASE),
    "rloo": ("RLOO", VERIFIER, SHARED_BASE),
}
PITFALLS = ("group_size", "temperature", "reward_hacking", "clipping")
SETTING_PITFALLS = {"num_generations": "group_size", "temperature": "temperature", "num_iterations": "clipping"}


def package_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in ["torch", "transformers", "trl", "peft", "datasets", "tokenizers", "snakemake", "scipy"]:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def chapter_token_budget() -> dict:
    """The generated-token ceiling of the chapter's full run, one epoch: problems x G x max_completion_length."""
    problems, completions = TRAIN_SIZE, FACTS["grpo.num_generations"].value
    length = FACTS["grpo.max_completion_length"].value
    return {"problems": problems, "completions": completions, "max_completion_length": length,
            "tokens": problems * completions * length}


def trainer_device(args: dict | None) -> dict | None:
    """Where one trainer ran, from its recorded TrainingArguments: cpu (``use_cpu``), gpu (bf16 or fp16), else None."""
    args = args or {}
    if args.get("use_cpu"):
        return {"device": "cpu", "precision": "float32"}
    for flag in ("bf16", "fp16"):
        if args.get(flag):
            return {"device": "gpu", "precision": f"{flag} mixed precision"}
    return None


def run_device(trains: dict) -> dict:
    """The run card's device: where each training stage ran (``trainer_device``), and their ``kind``."""
    stages = {name: where for name, train in trains.items()
              if (where := trainer_device(train.get("resolved_args"))) is not None}
    kinds = sorted({where["device"] for where in stages.values()})
    return {"kind": " and ".join(kinds) or None, "stages": stages,
            "source": "from the precision each trainer recorded in its arguments"}


def stage_updates(trains: dict, reward_model_train: dict | None = None) -> dict:
    """Per training stage that recorded them, the updates float16's scaler skipped or made from inf/NaN gradients."""
    from thai_grpo.core.io import UPDATE_COUNTS as COUNTS

    recorded = {f"train-{run}": train for run, train in trains.items()}
    recorded["reward_model"] = reward_model_train or {}
    return {stage: {key: record[key] for key in COUNTS} for stage, record in recorded.items()
            if all(key in record for key in COUNTS)}


def stage_dtypes(trains: dict, scores: dict, pairs: dict | None = None, reward_model: dict | None = None,
                 kl_real: dict | None = None, reward_model_train: dict | None = None,
                 extra_sets: dict | None = None) -> dict[str, dict]:
    """Per stage, the precision it recorded: the model's ``dtype``, and an evaluation's device and matmul precision."""
    def evaluation(record: dict | None) -> dict:
        record = record or {}
        return {key: record[key] for key in ("dtype", "device", "matmul_precision") if record.get(key) is not None}

    recorded = {f"train-{run}": {"dtype": train.get("weights_dtype")} for run, train in trains.items()}
    recorded["reward_model"] = {"dtype": (reward_model_train or {}).get("weights_dtype")}
    recorded.update({f"sample-{model}": evaluation(score) for model, score in scores.items()})
    for name, extra in (extra_sets or {}).items():
        recorded.update({f"sample_extra-{name}-{model}": evaluation(score)
                         for model, score in extra.get("scores", {}).items()})
    recorded.update({"preference_pairs": evaluation(pairs), "token_logprobs": evaluation(kl_real),
                     "reward_model_accuracy": evaluation(reward_model)})
    return {stage: record for stage, record in recorded.items() if record.get("dtype") is not None}


def run_sizes(sampling: dict, trains: dict, pairs: dict | None = None) -> dict:
    """The run card's sizes each job ran with (``auto`` resolved per card): batch sizes, PPO's ``chunk_floats``."""
    return {"eval.batch_size": {model: record.get("batch_size") for model, record in sampling.items()},
            "card_gib": sorted({record["card_gib"] for record in sampling.values() if record.get("card_gib")}),
            "preference_pairs.batch_size": ((pairs or {}).get("sampling") or {}).get("batch_size"),
            "ppo.chunk_floats": {name: train["args"]["chunk_floats"] for name, train in trains.items()
                                 if train.get("method") == "ppo" and "chunk_floats" in train.get("args", {})},
            "source": "what each sampling job and PPO run recorded (auto: sized to its GPU's memory)"}


def benchmark_column(benchmark_dir: str | Path, column: str) -> dict:
    """One column of Snakemake's ``benchmark:`` files per rule (mean over repeats), without non-numbers (``-``): ``s``,
    wall seconds; ``max_rss``, peak resident memory (MB) of the job's process tree."""
    values = {}
    for path in sorted(Path(benchmark_dir).glob("*.tsv")):
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        try:
            numbers = [float(r[column]) for r in rows]
        except (KeyError, ValueError):
            continue
        if numbers:
            values[path.stem] = round(sum(numbers) / len(numbers), 2)
    return values


def safetensors_parameter_count(model_dir: str | Path) -> int:
    """Parameters in a folder's safetensors files, read from their headers (no weights loaded, no torch imported)."""
    import math

    from safetensors import safe_open

    total = 0
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(str(path), framework="numpy") as handle:
            total += sum(math.prod(handle.get_slice(name).get_shape()) for name in handle.keys())
    return total


def stage_logs(benchmarks_dir: str | Path, stages) -> list[Path]:
    """The log files of ``stages`` (benchmark names), in the logs folder beside ``benchmarks_dir``."""
    logs = Path(benchmarks_dir).parent / "logs"
    return [logs / f"{stage}.log" for stage in stages]


def jobs_ran_on(logs) -> list[dict]:
    """{"cpu", "commit", "jobs"} per pair the jobs of ``logs`` ran on, most first, from each log's last machine line."""
    unknown = {"cpu": "not recorded", "commit": "not recorded"}
    machines = Counter()
    for log in map(Path, logs):
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.exists() else []
        records = [json.loads(line[len(JOB_MACHINE):]) for line in lines if line.startswith(JOB_MACHINE)]
        machine = records[-1] if records else unknown
        machines[(machine["cpu"], machine["commit"])] += 1
    return [{"cpu": cpu, "commit": commit, "jobs": n} for (cpu, commit), n in machines.most_common()]


def elapsed_seconds(benchmark_dir: str | Path, stages) -> float | None:
    """Wall time from the first job's start to the last's end: each job writes its benchmark file as it ends."""
    spans = []
    for stage, seconds in benchmark_column(benchmark_dir, "s").items():
        if stage in stages:
            end = (Path(benchmark_dir) / f"{stage}.tsv").stat().st_mtime
            spans.append((end - seconds, end))
    return round(max(e for _, e in spans) - min(s for s, _ in spans), 1) if spans else None


def scope_benchmarks(seconds: dict, models: list[str], extra_sets: list[str] = ()) -> dict:
    """The stages of one report: the shared ones, and those of its models and of its second held-out sets."""
    def belongs(stage: str) -> bool:
        kind, _, model = stage.partition("-")
        if kind == "extra_heldout":
            return model in extra_sets
        if kind in ("sample_extra", "score_extra"):
            extra, _, model = model.partition("-")  # set names have no '-' (config/schema.yaml)
            return extra in extra_sets and model in models
        return not model or (kind in ("train", "sample", "score") and model in models)

    return {stage: value for stage, value in seconds.items() if belongs(stage)}


def method_kind(plan: dict) -> str:
    """The comparison row a variant fills: ``dr_grpo`` for GRPO with TRL's Dr.GRPO loss, else its method."""
    if plan["method"] == "grpo" and plan["grpo_args"].get("loss_type") == "dr_grpo":
        return "dr_grpo"
    return plan["method"]


def _kind(name: str, plan: dict | None) -> str:
    """The METHODS row of a variant: its plan's method (dr_grpo for GRPO with the Dr.GRPO loss)."""
    return method_kind(plan) if plan else (name if name in METHODS else "grpo")


def _ppo_costs(name: str, train: dict, benchmarks: dict, peak_memory: dict, pairs: dict | None,
               reward_model: dict | None) -> dict:
    """A PPO row's costs: with a learned reward model, its training and the pairs' sampling count as PPO's too."""
    learned = train.get("score", "reward_model") == "reward_model"
    steps = train.get("steps", [])
    notes = [f"value loss {steps[0]['value_loss']:.4f} -> {steps[-1]['value_loss']:.4f}, explained variance "
             f"{steps[0]['explained_variance']:.2f} -> {steps[-1]['explained_variance']:.2f} (first -> last step)"] \
        if steps else []
    parameters = train.get("parameters", {})
    costs = {"models_in_memory": None if learned else "3 (policy, reference, value model; the verifier is code)",
             "human_labels": None if learned else VERIFIER,
             "trainable_detail": {"policy": parameters.get("policy_trainable"),
                                  "value": parameters.get("value_trainable")}}
    if not learned:
        return {**costs, "notes": ["scored by the code rewards, no reward model; value model from a fresh LoRA",
                                   *notes]}
    rm_seconds, rm_memory = benchmarks.get("reward_model"), peak_memory.get("reward_model")
    train_seconds = benchmarks.get(f"train-{name}")
    heldout, trained = ((reward_model or {}).get(part) or {} for part in ("heldout", "train"))
    if (reward_model or {}).get("skipped"):
        notes.insert(0, reward_model["skipped"])
    elif heldout.get("accuracy") is not None and trained.get("accuracy") is not None:
        notes.insert(0, f"reward model: pairwise accuracy {heldout['accuracy']:.2f} on {heldout['pairs']} held-out "
                        f"pairs ({trained['accuracy']:.2f} on its {trained['pairs']} training pairs); pairs ranked "
                        "by the verifier, not by people")
    tokens = (pairs or {}).get("generated_tokens")
    if tokens:
        notes.append("generated tokens: the rollouts plus sampling the reward model's pairs")
    return {**costs, "notes": notes, "peak_memory_mb": max(filter(None, [peak_memory.get(f"train-{name}"), rm_memory]),
                                                           default=None),
            "train_seconds": None if train_seconds is None else round(train_seconds + (rm_seconds or 0.0), 2),
            "reward_model_seconds": rm_seconds, "reward_model_peak_memory_mb": rm_memory,
            "reward_model_trainable": ((reward_model or {}).get("parameters") or {}).get("trainable"),
            "extra_tokens": tokens, "sampling_seconds": benchmarks.get("preference_pairs")}


def _variant_row(name: str, kind: str, scores: dict, train: dict, benchmarks: dict, pairs: dict | None,
                 paired: dict, description: str, peak_memory: dict, reward_model: dict | None,
                 displacement: float | None) -> dict:
    label, labels, models = METHODS[kind]
    tokens, notes = sum(s.get("generated_tokens", 0) for s in train.get("steps", [])) or None, []
    if kind == "dpo":
        if pairs:
            tokens = pairs.get("generated_tokens") or None
            notes.append(f"{pairs['pairs']} pairs from {pairs['problems']} training problems x "
                         f"{pairs['samples_per_problem']} SFT samples ({pairs['all_right']} always right, "
                         f"{pairs['all_wrong']} never right: no pair); generated tokens: sampling the pairs")
        notes.append(train.get("skipped") or "DPO can only rank answers that exist in the pairs file")
    if train.get("dropped_grpo_fields") and kind == "rloo":
        notes.append("GRPO-only fields not used: " + ", ".join(train["dropped_grpo_fields"]))
    row = {"method": label if name == kind else f"{label} ({name})", "model": name if name in scores else None,
           "human_labels": labels, "models_in_memory": models,
           "trainable_parameters": train.get("parameters", {}).get("trainable"),
           "train_seconds": benchmarks.get(f"train-{name}"), "generated_tokens": tokens,
           "peak_memory_mb": peak_memory.get(f"train-{name}"),
           "sampling_seconds": benchmarks.get("preference_pairs") if kind == "dpo" else None,
           "run": name in scores, "note": "; ".join(notes) if notes else description,
           "paired_vs_sft": paired.get(f"{name}_vs_sft"),
           "update_size": {"mean_grad_norm": mean_grad_norm(train), "adapter_displacement": displacement}}
    if kind == "ppo":
        costs = _ppo_costs(name, train, benchmarks, peak_memory, pairs, reward_model)
        extra = costs.pop("extra_tokens", None)
        row.update({key: value for key, value in costs.items() if key != "notes" and value is not None})
        row["generated_tokens"] = (tokens or 0) + (extra or 0) or None
        row["note"] = "; ".join(costs["notes"] + ([description] if description else []))
    return row


def method_rows(scores: dict, trains: dict, benchmarks: dict, sft_parameters: int | None, plans: dict | None = None,
                pairs: dict | None = None, paired: dict | None = None, peak_memory: dict | None = None,
                reward_model: dict | None = None, displacements: dict | None = None) -> list[dict]:
    """One comparison row per method run (group method or ablation) in the chapter's order; "not run" if left out."""
    plans, paired, peak_memory = plans or {}, paired or {}, peak_memory or {}
    variants = [name for name in dict.fromkeys([*trains, *scores]) if name not in ("base", "sft")
                and (plans.get(name) or {}).get("group", "method") in ("method", "ablation")]
    rows = []
    for key, (label, labels, models) in METHODS.items():
        names = [v for v in variants if _kind(v, plans.get(v)) == key]
        rows += [_variant_row(v, key, scores, trains.get(v, {}), benchmarks, pairs, paired,
                              (plans.get(v) or {}).get("overrides", {}).get("description", ""), peak_memory,
                              reward_model, (displacements or {}).get(v))
                 for v in names]
        if names:
            continue
        ran = key in scores and key in ("base", "sft")
        rows.append({"method": label, "model": key if ran else None, "human_labels": labels,
                     "models_in_memory": models, "trainable_parameters": sft_parameters if key == "sft" else None,
                     "train_seconds": benchmarks.get("sft_adapter") if key == "sft" else None,
                     "peak_memory_mb": peak_memory.get("sft_adapter") if key == "sft" else None,
                     "generated_tokens": None, "run": ran, "note": "" if ran else "not run by this config",
                     "paired_vs_sft": None})
    return rows


def pitfall_sets(plans: dict, reference: str = "grpo") -> dict:
    """Which runs each pitfall figure overlays, ``reference`` first, by the reward or setting each run changes."""
    ref_grpo = (plans.get(reference) or {}).get("grpo_args", {})
    sets = {name: [] for name in PITFALLS}
    for name, plan in plans.items():
        if plan.get("group") != "pitfall":
            continue
        changes = set((plan["overrides"] or {}).get("grpo", {})) if "overrides" in plan else {
            key for key in SETTING_PITFALLS if plan["grpo_args"].get(key) != ref_grpo.get(key)}
        pitfall = "reward_hacking" if "format_lenient" in plan["rewards"] else next(
            (pitfall for key, pitfall in SETTING_PITFALLS.items() if key in changes), None)
        if pitfall:
            sets[pitfall].append(name)
    sets["group_size"].sort(key=lambda n: plans[n]["grpo_args"]["num_generations"])
    with_reference = [reference] if reference in plans else []
    return {name: with_reference + runs if runs else [] for name, runs in sets.items()}


def _run_summary(name: str, train: dict, plan: dict | None) -> dict:
    args = train.get("args") or (plan or {}).get("grpo_args", {})  # what the trainer was given (DPO: DPOConfig's)
    settings = {key: args.get(key) for key in ("num_generations", "temperature", "beta", "loss_type", "scale_rewards",
                                               "per_device_train_batch_size", "max_steps", "num_iterations")}
    return {"method": train.get("method", (plan or {}).get("method", "grpo")),
            "group": (plan or {}).get("group", "method"), "kind": _kind(name, plan),
            "settings": {**settings, "rewards": None if train.get("method") == "dpo" else (plan or {}).get("rewards")},
            "steps": train.get("steps", []), "example_groups": train.get("example_groups", {}),
            "empty_think_examples": train.get("empty_think_examples", []), "skipped": train.get("skipped"),
            "health": training_health(train.get("steps", []))}


def paired_tests(scores: dict, n_boot: int, seed: int) -> dict:
    """``{MODEL_vs_sft: test}``: the paired pass@1 bootstrap of every trained model against SFT, same problems."""
    return {f"{m}_vs_sft": paired_test(scores[m], scores["sft"], "pass@1", n_boot, seed)
            for m in scores if m not in ("sft", "base") and "sft" in scores}


def narrowing(scores: dict, n_boot: int, seed: int, weaker: str = "sft", stronger: str = "grpo") -> dict | None:
    """GRPO's pass@k gap over SFT at k = n / 2 against the ceiling's (at k = n each problem's pass@k is one 0/1 and
    the standard error tracks its own estimate); None without both models or with n < 4."""
    if weaker not in scores or stronger not in scores or scores[weaker].get("n_samples", 0) < 4:
        return None
    n = scores[weaker]["n_samples"]
    return {"weaker": weaker, "stronger": stronger,
            **narrowing_test(scores[weaker]["per_problem_correct"], scores[stronger]["per_problem_correct"], n,
                             n // 2, n_boot, seed)}


def extra_set_results(config: dict, extra_sets: dict, n_boot: int, seed: int) -> dict:
    """Per second held-out set: its config, problem counts, every model's scores and paired tests against SFT."""
    specs = config["eval"].get("extra_sets") or {}
    return {name: {"title": specs.get(name, {}).get("title", name),
                   "source": {key: specs.get(name, {}).get(key) for key in ("source", "path", "name", "split",
                                                                            "revision")},
                   "data": parts["stats"], "eval": parts["scores"],
                   "paired_tests": paired_tests(parts["scores"], n_boot, seed)}
            for name, parts in extra_sets.items()}


def with_kl_summary(kl_real: dict | None, n_boot: int, seed: int) -> dict | None:
    """``kl_real`` with ``summary`` (``kl.real_kl_summary``) when it holds the exact per-position KL."""
    if not kl_real or "kl_exact" not in kl_real:
        return kl_real
    return {**kl_real, "summary": real_kl_summary(kl_real, n_boot, seed)}


# The optional targets' results (rules/common.smk OPTIONAL_RESULTS) and their keys in the main report's results.
STUDY_KEYS = {"seeds": "seed_study", "passk": "passk", "hacking": "hacking", "losses": "losses",
              "chains": "chain_study"}

def add_studies(results: dict, studies: dict, fingerprint: str | None) -> dict:
    """``results`` with the built studies, and ``studies_from_other_settings``: those built from other settings."""
    for name, study in studies.items():
        results[STUDY_KEYS[name]] = study
    results["studies_from_other_settings"] = sorted(
        name for name, study in studies.items() if fingerprint and study.get("settings_fingerprint") != fingerprint)
    return results


def assemble(config: dict, split_stats: dict, scores: dict, trains: dict, benchmarks: dict,
             base_parameters: int, n_boot: int, seed: int, plans: dict | None = None,
             pairs: dict | None = None, kl_real: dict | None = None, extra_sets: dict | None = None,
             own_temperature: dict | None = None, peak_memory: dict | None = None,
             reward_model: dict | None = None, displacements: dict | None = None,
             chapter_values: dict | None = None, reward_model_train: dict | None = None,
             sizes: dict | None = None) -> dict:
    """The whole results document: run card, main GRPO run, every trained variant, scores and the comparison."""
    plans, extra_sets = plans or {}, extra_sets or {}
    main = "grpo" if "grpo" in trains else next(iter(trains), None)
    main_train = trains.get(main, {})
    per_step = [s.get("generated_tokens", 0) for s in main_train.get("steps", [])]
    paired = paired_tests(scores, n_boot, seed)
    benchmarks = scope_benchmarks(benchmarks, list(scores), list(extra_sets))
    peak_memory = scope_benchmarks(peak_memory or {}, list(scores), list(extra_sets))
    return {
        "config": config,
        "run": {
            "seeds": {"data": config["data"]["shuffle_seed"], "train": config["seed"], "eval": config["eval"]["seed"]},
            "versions": package_versions(),
            "device": run_device(trains),
            "stage_dtypes": stage_dtypes(trains, scores, pairs, reward_model, kl_real, reward_model_train, extra_sets),
            "updates": stage_updates(trains, reward_model_train),
            "sizes": run_sizes(sizes or {}, trains, pairs),
            "data": {"source": config["data"]["source"], **split_stats},
            "model": {"base": config["base"].get("name_or_path") or "tiny Qwen3 trained from scratch"
                      + (" (shipped, assets/tiny-base)" if config["base"]["source"] == "shipped" else ""),
                      "base_parameters": base_parameters,
                      "trainable_parameters": main_train.get("parameters", {}).get("trainable"),
                      "adapter": config["sft"].get("name_or_path") or
                      f"LoRA r={config['sft'].get('lora', {}).get('r')} "
                      + ("trained here" if config["sft"]["source"] == "train" else "(shipped with the base)"),
                      "kl_reference": main_train.get("kl_reference")},
            "chapter_departures": run_card_departures(chapter_values or {}, offline=config["base"]["source"] in
                                                      ("shipped", "scratch")),
            "benchmarks": benchmarks,
            "peak_memory_mb": peak_memory,
            "generated_tokens": {"per_step": per_step, "total": int(sum(per_step)),
                                 "chapter_full_run": chapter_token_budget()},
        },
        "train": {"variant": main, "steps": main_train.get("steps", []),
                  "example_groups": main_train.get("example_groups", {}),
                  "pitfalls": main_train.get("pitfalls"),  # rollouts.pitfall_numbers, where it sampled rollouts
                  "health": training_health(main_train.get("steps", []))},
        "runs": {name: _run_summary(name, t, plans.get(name)) for name, t in trains.items()},
        "eval": scores,
        "eval_own_temperature": own_temperature or {},
        "preference_pairs": pairs,
        "reward_model": reward_model,
        "pitfalls": pitfall_sets(plans, main or "grpo"),
        "comparison": {"paired_tests": paired, "plan": analysis_plan(config),
                       "pairwise": pairwise_tests(scores, list(scores), n_boot=n_boot, seed=seed,
                                                  plan=analysis_plan(config)),
                       "narrowing": narrowing(scores, n_boot, seed),
                       "methods": method_rows(scores, trains, benchmarks,
                                              main_train.get("parameters", {}).get("trainable"), plans, pairs,
                                              paired, peak_memory, reward_model, displacements)},
        "kl_real": with_kl_summary(kl_real, n_boot, seed),
        "extra_sets": extra_set_results(config, extra_sets, n_boot, seed),
    }
