"""results.json documents for the report's tests, shaped like two runs: the offline default (a tiny Qwen3 on a CPU,
config/config.yaml) and the real run (Qwen/Qwen3-0.6B on a GPU, config/qwen3-0.6b.yaml). Each is built by
``results.assemble``, as the results rule builds it, from the config files themselves, the smoke run's recorded
training steps (tests/fixtures/results_smoke_run.json) and held-out scores made by ``scoring.score_model`` from
per-problem solve rates chosen so that the plan's verdicts differ between methods."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from thai_grpo.workflow import load_config_files, variant_plan
from thai_grpo.evaluation.scoring import score_model
from thai_grpo.report.results import assemble

ROOT = Path(__file__).resolve().parent.parent
SMOKE_RUN = ROOT / "tests" / "fixtures" / "results_smoke_run.json"
OFFLINE = ["config/config.yaml"]
REAL = ["config/config.yaml", "config/qwen3-0.6b.yaml"]
QWEN3_PARAMETERS = 596_049_920  # Qwen/Qwen3-0.6B's safetensors, the tied embedding counted once
TINY_PARAMETERS = 1_117_184
PROBLEMS, SAMPLES = 40, 8
# Per model, the shift of its solve rates from SFT's (a method that gains, one that is level, one that loses).
SHIFTS = {"base": -0.30, "sft": 0.0, "grpo": 0.25, "dr_grpo": 0.22, "rloo": 0.02, "dpo": 0.0, "ppo": -0.12}
GPU_ARGS = {"use_cpu": False, "bf16": True, "fp16": False}
CPU_ARGS = {"use_cpu": True, "bf16": False, "fp16": False}


def scores_for(models: list[str], seed: int = 0) -> dict[str, dict]:
    """Held-out scores of ``models`` on the same PROBLEMS problems x SAMPLES samples, from solve rates SFT's +
    SHIFTS[model] (clipped to [0, 1]), through the pipeline's own scorer."""
    rng = np.random.default_rng(seed)
    sft_rates = rng.uniform(0.05, 0.7, PROBLEMS)
    scores = {}
    for model in models:
        rates = np.clip(sft_rates + SHIFTS.get(model, 0.0) + rng.normal(0, 0.05, PROBLEMS), 0, 1)
        records = [{"completions": [{"correct": float(hit), "format": 0.3, "thai": 0.2, "total": 0.5 + hit,
                                     "num_tokens": 120, "truncated": False}
                                    for hit in rng.random(SAMPLES) < rate],
                    "greedy": {"correct": float(rng.random() < rate)}} for rate in rates]
        scores[model] = score_model(records, [1, SAMPLES], n_boot=200, seed=0)
    return scores


def _trains(config: dict, models: list[str], args: dict) -> dict[str, dict]:
    """Every trained model's train.json as the trainers write it: the smoke run's recorded steps of that method,
    its parameter counts and the TrainingArguments it ran with (``args``: the machine's precision flags)."""
    smoke = json.loads(SMOKE_RUN.read_text(encoding="utf-8"))
    trains = {}
    for model in models:
        if model in ("base", "sft"):
            continue
        run = smoke["runs"].get(model) or smoke["runs"]["grpo"]
        train = {"method": variant_plan(config, model)["method"], "steps": run["steps"],
                 "example_groups": run.get("example_groups") or {}, "parameters": {"trainable": 10_092_544},
                 "kl_reference": "the base with the adapter disabled"}
        if train["method"] != "ppo":  # PPO records its own settings, not TrainingArguments
            train["resolved_args"] = dict(args)
        trains[model] = train
    return trains


def document(config_files: list[str], args: dict, base_parameters: int, chapter_values: dict | None = None) -> dict:
    """results.json of a run of ``config_files`` whose trainers ran with ``args``: the config's eval.models, their
    scores (``scores_for``), the plan's tests and the run card."""
    config = load_config_files([str(ROOT / path) for path in config_files])
    models = config["eval"]["models"]
    scores = scores_for(models)
    trains = _trains(config, models, args)
    plans = {name: variant_plan(config, name) for name in trains}
    stats = {"source_rows": 1000, "train_size": config["data"]["train_size"], "heldout_size": PROBLEMS,
             "sft_size": config["data"]["sft_size"], "dropped_unparseable": 0, "leakage_check": "text hash"}
    return assemble(config, stats, scores, trains, {}, base_parameters, 200, 0, plans=plans,
                    chapter_values=chapter_values)


def offline_document() -> dict:
    """The offline default's results: the tiny shipped base on a CPU, two of its recorded departures."""
    return document(OFFLINE, CPU_ARGS, TINY_PARAMETERS,
                    chapter_values={"config.base.dtype": "float32", "grpo.max_completion_length": 80})


def real_document() -> dict:
    """The real run's results: Qwen/Qwen3-0.6B on a GPU in bf16 (a CUDA build of torch), the real config's methods,
    no departure."""
    results = document(REAL, GPU_ARGS, QWEN3_PARAMETERS, chapter_values={"config.base.dtype": "auto",
                                                                         "grpo.max_completion_length": 256})
    results["run"]["versions"]["torch"] = "2.9.1+cu128"
    return results
