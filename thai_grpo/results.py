"""Assembling ``results/results.json``: the run card, per-step training metrics, held-out scores, comparison."""

from __future__ import annotations

import csv
import importlib.metadata
import platform
from pathlib import Path

from thai_grpo.evaluation import paired_pass1_test
from thai_grpo.health import training_health

SEED_ESTIMATE_FULL_REAL_TOKENS = 128 * 8 * 256  # problems x G x max_completion_length of the chapter's full run

# What each method needs, from the chapter's comparison (read right to left: labels go to zero).
METHODS = {
    "base": ("Base (no adapter)", "none", "1 (base)"),
    "sft": ("SFT", "one reference solution per example", "1 (base + LoRA)"),
    "ppo": ("PPO", "preference pairs -> reward model", "4 (policy, reference, reward model, value model)"),
    "dpo": ("DPO", "preference pairs (chosen / rejected)", "2 (policy, reference)"),
    "grpo": ("GRPO", "none: a verifier (code) grades", "2 (policy, reference; one shared base with LoRA)"),
    "dr_grpo": ("Dr.GRPO", "none: a verifier (code) grades", "2 (policy, reference; one shared base with LoRA)"),
    "rloo": ("RLOO", "none: a verifier (code) grades", "2 (policy, reference)"),
}


def package_versions() -> dict:
    names = ["torch", "transformers", "trl", "peft", "datasets", "tokenizers", "snakemake", "scipy"]
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def benchmark_seconds(benchmark_dir: str | Path) -> dict:
    """Wall seconds per rule from Snakemake's ``benchmark:`` files (first column ``s``)."""
    seconds = {}
    for path in sorted(Path(benchmark_dir).glob("*.tsv")):
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        if rows:
            seconds[path.stem] = round(sum(float(r["s"]) for r in rows) / len(rows), 2)
    return seconds


def method_rows(scores: dict, trains: dict, benchmarks: dict, sft_parameters: int | None) -> list[dict]:
    """One comparison row per method; methods the pipeline did not run say so."""
    rows = []
    for key, (label, labels, models) in METHODS.items():
        ran = key in scores
        train = trains.get(key, {})
        rows.append({
            "method": label, "model": key if ran else None, "human_labels": labels, "models_in_memory": models,
            "trainable_parameters": train.get("parameters", {}).get("trainable",
                                                                    sft_parameters if key == "sft" else None),
            "train_seconds": benchmarks.get(f"grpo-{key}", benchmarks.get("sft_adapter") if key == "sft" else None),
            "generated_tokens": sum(s.get("generated_tokens", 0) for s in train.get("steps", [])) or None,
            "run": ran, "note": "" if ran else "not run by this config",
        })
    known = set(METHODS)
    rows += [{"method": name, "model": name, "human_labels": "none: a verifier (code) grades",
              "models_in_memory": "2 (policy, reference)",
              "trainable_parameters": trains.get(name, {}).get("parameters", {}).get("trainable"),
              "train_seconds": benchmarks.get(f"grpo-{name}"), "run": True, "note": "variant",
              "generated_tokens": sum(s.get("generated_tokens", 0) for s in trains.get(name, {}).get("steps", []))}
             for name in scores if name not in known]
    return rows


def assemble(config: dict, split_stats: dict, scores: dict, trains: dict, benchmarks: dict,
             base_parameters: int, n_boot: int, seed: int) -> dict:
    """The whole results document; ``train`` holds the main GRPO run, ``runs`` every variant."""
    main = "grpo" if "grpo" in trains else next(iter(trains), None)
    main_train = trains.get(main, {})
    per_step = [s.get("generated_tokens", 0) for s in main_train.get("steps", [])]
    paired = {f"{m}_vs_sft": paired_pass1_test(scores[m], scores["sft"], n_boot, seed)
              for m in scores if m not in ("sft", "base") and "sft" in scores}
    return {
        "config": config,
        "run": {
            "seeds": {"data": config["data"]["shuffle_seed"], "train": config["seed"], "eval": config["eval"]["seed"]},
            "versions": package_versions(),
            "data": {"source": config["data"]["source"], **split_stats},
            "model": {"base": config["base"].get("name_or_path") or "tiny Qwen3 trained from scratch",
                      "base_parameters": base_parameters,
                      "trainable_parameters": main_train.get("parameters", {}).get("trainable"),
                      "adapter": config["sft"].get("name_or_path") or
                      f"LoRA r={config['sft'].get('lora', {}).get('r')} trained here",
                      "kl_reference": main_train.get("kl_reference")},
            "benchmarks": benchmarks,
            "generated_tokens": {"per_step": per_step, "total": int(sum(per_step)),
                                 "seed_estimate_full_real": SEED_ESTIMATE_FULL_REAL_TOKENS},
        },
        "train": {"variant": main, "steps": main_train.get("steps", []),
                  "example_groups": main_train.get("example_groups", {}),
                  "health": training_health(main_train.get("steps", []))},
        "runs": {name: {"steps": t.get("steps", []), "example_groups": t.get("example_groups", {}),
                        "health": training_health(t.get("steps", []))} for name, t in trains.items()},
        "eval": scores,
        "comparison": {"paired_tests": paired,
                       "methods": method_rows(scores, trains, benchmarks, main_train.get("parameters", {}).get("trainable"))},
    }
