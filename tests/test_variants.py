"""Methods and pitfalls as variants: the pure pieces (config mapping, leave-one-out baseline, preference pairs,
empty think blocks, dispatch, pitfall sets, comparison rows), DPO and RLOO on a tiny model, and which jobs a
config change schedules (dry-runs of a scratch copy of the workflow whose outputs are placeholders)."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml
from workflow import copy_workflow, placeholder_run, scheduled_jobs, write_extra_set_config
from workflow import run_snakemake as snakemake
from configs import config_of
from run_specs import TRAINING, plan, run_spec

from thai_grpo.core.config import ConfigError
from thai_grpo.workflow import (NOT_INHERITED, SCHEDULE, check_method_fields, checked_config, deep_merge, method_grpo_args,
                                variant_plan, variant_settings)
from thai_grpo.core.config import inherited_args
from thai_grpo.methods import RunSpec, train_variant, trainer_for
from thai_grpo.methods.dpo import dpo_step
from thai_grpo.analyses.health import format_hacking_suspect, training_health
from thai_grpo.core.rewards import empty_think
from thai_grpo.methods.recorder import batch_metrics, think_shares
from thai_grpo.methods.preferences import build_pairs, pair_for_problem
from thai_grpo.report.results import method_kind
from thai_grpo.methods.rloo import leave_one_out_advantages
from thai_grpo.methods.rloo import rloo_args
from thai_grpo.report.results import extra_set_results, method_rows, pitfall_sets, scope_benchmarks

REPO = Path(__file__).resolve().parents[1]


def load(name="config.yaml"):
    return config_of() if name == "config.yaml" else config_of(name)


# --------------------------------------------------------------------------- RLOO / DPO config mapping
def test_rloo_args_keep_shared_fields_and_drop_grpo_only_ones():
    from trl import RLOOConfig

    grpo = variant_plan(load(), "rloo")["grpo_args"]
    args, dropped = rloo_args(grpo, {f.name for f in dataclasses.fields(RLOOConfig)})
    for key in ("num_generations", "per_device_train_batch_size", "learning_rate", "max_steps",
                "max_completion_length", "temperature", "beta", "epsilon"):
        assert args[key] == grpo[key], key
    assert {"loss_type", "scale_rewards"} <= set(dropped) and not {"loss_type", "scale_rewards"} & set(args)
    assert set(args) | set(dropped) == set(grpo)


def test_rloo_args_on_hand_made_fields_with_overrides():
    grpo = {"num_generations": 4, "beta": 0.04, "loss_type": "grpo", "num_processes": 2}
    args, dropped = rloo_args(grpo, {"num_generations", "beta", "normalize_advantages"}, {"normalize_advantages": True})
    assert args == {"num_generations": 4, "beta": 0.04, "num_processes": 2, "normalize_advantages": True}
    assert dropped == ["loss_type"]


def test_dpo_args_inherit_the_bookkeeping_not_the_schedule_nor_the_meaning_changing_fields():
    grpo = variant_settings(load(), "dpo")["grpo"]  # the merged section, before the plan keeps what DPO reads
    inherited = method_grpo_args("dpo", grpo)
    args, dropped = {**inherited, "beta": 0.1}, set(grpo) - set(inherited)  # as dpo.train merges the dpo: overrides
    assert args["save_steps"] == grpo["save_steps"] and args["logging_steps"] == grpo["logging_steps"]
    assert not set(SCHEDULE) & set(args)  # GRPO's 40 rollout steps are no length for a pass over DPO's pairs
    assert args["beta"] == 0.1 and "loss_type" not in args and "per_device_train_batch_size" not in args
    assert set(NOT_INHERITED) & set(grpo) <= set(dropped) and "num_generations" in dropped


def test_inherited_args_is_a_filter():
    assert inherited_args({"a": 1, "b": 2, "c": 3}, {"a", "b"}, exclude=("b",)) == ({"a": 1}, ["b", "c"])


def test_dpo_step_maps_trl_logs_and_skips_the_summary():
    logs = {"loss": 0.69, "rewards/margins": 0.1, "rewards/accuracies": 0.5, "epoch": 1.0}
    assert dpo_step(logs, 3) == {"step": 3, "loss": 0.69, "reward_margin": 0.1, "reward_accuracy": 0.5}
    assert dpo_step({"train_runtime": 1.0, "train_loss": 0.69}, 3) is None


# --------------------------------------------------------------------------- RLOO baseline
def test_leave_one_out_advantages_against_the_formula():
    rewards = [1.5, 0.3, 0.5, 1.5, 0.2, 0.2]
    advantages = leave_one_out_advantages(rewards, 3)
    expected = [1.5 - 0.4, 0.3 - 1.0, 0.5 - 0.9, 1.5 - 0.2, 0.2 - 0.85, 0.2 - 0.85]
    np.testing.assert_allclose(advantages, expected)
    groups = np.reshape(rewards, (-1, 3))
    np.testing.assert_allclose(advantages, (3 / 2 * (groups - groups.mean(axis=1, keepdims=True))).ravel())
    np.testing.assert_allclose(leave_one_out_advantages([0.3] * 4, 4), 0.0)


# --------------------------------------------------------------------------- preference pairs
def sample(text, correct, total=None, tokens=5):
    return {"text": text, "correct": correct, "total": correct + 0.5 if total is None else total, "num_tokens": tokens}


def hand_made_records():
    return [
        {"id": "mixed", "question": "q1", "gold": 7,
         "completions": [sample("wrong-a", 0.0), sample("right-a", 1.0), sample("wrong-b", 0.0),
                         sample("right-b", 1.0)]},
        {"id": "all-right", "question": "q2", "gold": 3, "completions": [sample(f"r{i}", 1.0) for i in range(4)]},
        {"id": "all-wrong", "question": "q3", "gold": 4, "completions": [sample(f"w{i}", 0.0) for i in range(4)]},
        {"id": "one-right", "question": "q4", "gold": 5,
         "completions": [sample("w", 0.0), sample("w2", 0.0), sample("w3", 0.0), sample("right", 1.0)]},
    ]


def test_pairs_are_chosen_correct_rejected_wrong_and_skip_unanimous_problems():
    pairs, stats = build_pairs(hand_made_records(), "SYS")
    assert [p["id"] for p in pairs] == ["mixed", "one-right"]
    first = pairs[0]
    assert first["prompt"] == [{"role": "system", "content": "SYS"}, {"role": "user", "content": "q1"}]
    assert first["chosen"] == [{"role": "assistant", "content": "right-a"}]
    assert first["rejected"] == [{"role": "assistant", "content": "wrong-a"}]
    assert pairs[1]["chosen"][0]["content"] == "right" and pairs[1]["rejected"][0]["content"] == "w"
    assert stats == {"problems": 4, "samples": 16, "samples_per_problem": 4, "correct_samples": 7, "pairs": 2,
                     "all_right": 1, "all_wrong": 1, "generated_tokens": 80}


def test_pairs_are_deterministic_and_need_both_kinds():
    assert build_pairs(hand_made_records(), "S") == build_pairs(copy.deepcopy(hand_made_records()), "S")
    assert pair_for_problem([sample("a", 1.0)]) is None and pair_for_problem([]) is None
    assert build_pairs([], "S") == ([], {"problems": 0, "samples": 0, "samples_per_problem": 0, "correct_samples": 0,
                                         "pairs": 0, "all_right": 0, "all_wrong": 0, "generated_tokens": 0})


# --------------------------------------------------------------------------- empty think blocks
def test_empty_think_share_on_hand_built_completions():
    completions = ["<think></think>\n12", "<think>4 x 3 = 12</think>\n12", "12", "<think> </think>12",
                   "<think></think>", "<think>\n</think>5", "no tags <think></think> 7"]
    assert [empty_think(c) for c in completions] == [True, False, False, False, True, False, True]
    assert think_shares({}, completions)["empty_think_share"] == pytest.approx(3 / 7)
    assert think_shares({}, [])["empty_think_share"] == 0.0
    metrics = batch_metrics({"correct": [0.0, 1.0]}, [3, 4], 2, ["<think></think>1", "<think>x</think>2"])
    assert metrics["empty_think_share"] == 0.5


def hacking_steps(shares, accuracies, lenient=True):
    name = "format_lenient" if lenient else "format"
    return [{"step": i + 1, "empty_think_share": e, "accuracy": a, "reward_mean": 0.5 + e * 0.3,
             "hollow_think_paid_share": e if lenient else None,  # the lenient regex pays every empty block
             "completion_length_mean": 40 - 20 * e, "rewards": {"correct": a, name: 0.3}}
            for i, (e, a) in enumerate(zip(shares, accuracies))]


def test_lenient_format_hack_is_flagged_only_when_it_happens():
    hacked = hacking_steps([0.0, 0.0, 0.2, 0.4, 0.7, 0.9], [0.2, 0.21, 0.2, 0.2, 0.19, 0.2])
    assert format_hacking_suspect(hacked)["suspect"]
    health = training_health(hacked)
    assert health["hacking_suspect"] and "lenient format regex" in health["messages"][-1]
    learning = hacking_steps([0.0, 0.0, 0.2, 0.4, 0.7, 0.9], [0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
    assert not format_hacking_suspect(learning)["suspect"]
    strict = hacking_steps([0.0, 0.0, 0.2, 0.4, 0.7, 0.9], [0.2] * 6, lenient=False)
    assert not format_hacking_suspect(strict)["suspect"] and not training_health(strict)["hacking_suspect"]
    never = hacking_steps([0.0] * 6, [0.2] * 6)
    assert not format_hacking_suspect(never)["suspect"]


# --------------------------------------------------------------------------- dispatch
def test_every_configured_variant_has_a_plan_and_a_trainer():
    config = load()
    kinds = {name: method_kind(variant_plan(config, name)) for name in config["variants"]}
    assert kinds["grpo"] == "grpo" and kinds["dr_grpo"] == "dr_grpo" and kinds["rloo"] == "rloo"
    assert kinds["dpo"] == "dpo" and kinds["g2"] == kinds["temp0.3"] == kinds["lenient_format"] == "grpo"
    plan = variant_plan(config, "dr_grpo")
    assert plan["grpo_args"]["scale_rewards"] == "none" and plan["grpo_args"]["beta"] == config["grpo"]["beta"]
    assert variant_plan(config, "lenient_format")["rewards"] == ["correct", "format_lenient", "thai"]
    assert variant_plan(config, "g2")["group"] == "pitfall" and plan["group"] == "method"
    import thai_grpo.methods.dpo
    import thai_grpo.methods.grpo
    import thai_grpo.methods.ppo
    import thai_grpo.methods.rloo

    assert [trainer_for(m) for m in ("grpo", "rloo", "dpo", "ppo")] == [
        thai_grpo.methods.grpo.train, thai_grpo.methods.rloo.train, thai_grpo.methods.dpo.train,
        thai_grpo.methods.ppo.train]
    assert kinds["ppo"] == kinds["ppo_verifier"] == "ppo" and variant_plan(config, "ppo_verifier")["group"] == "ablation"
    assert variant_plan(config, "ppo_verifier")["ppo"]["score"] == "verifier"
    with pytest.raises(ValueError, match="unknown method"):
        trainer_for("sac")


def test_a_grpo_job_imports_no_other_method_and_on_a_cpu_no_gpu_code(tmp_path):
    """What scripts/train.py and GRPO's trainer import, in a fresh interpreter without NVIDIA's driver on its PATH: no
    PPO, DPO, RLOO, reward-model or report code, no GPU layer (slots, memory plan): a reader of one GRPO run meets
    none of it."""
    import subprocess
    import sys

    probe = ("import sys; from thai_grpo.jobs.job import model_job; from thai_grpo.methods import trainer_for; "
             "trainer_for('grpo'); import thai_grpo.models.loading; "
             "from thai_grpo.jobs.devices import current_capability; current_capability(); "
             "print(' '.join(sorted(m for m in sys.modules if m.startswith('thai_grpo'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env={"PATH": str(tmp_path)})
    loaded = set(out.stdout.split())
    assert "thai_grpo.methods.grpo" in loaded, out.stderr[-2000:]
    others = {"thai_grpo.methods.ppo", "thai_grpo.methods.dpo", "thai_grpo.methods.rloo",
              "thai_grpo.methods.reward_model", "thai_grpo.methods.preferences", "thai_grpo.jobs.gpus",
              "thai_grpo.jobs.memory_plan", "thai_grpo.jobs.memory_stages"}
    assert not loaded & others and not {m for m in loaded if m.startswith(("thai_grpo.report", "thai_grpo.evaluation"))}


def test_train_variant_calls_the_method_trainer(monkeypatch):
    import thai_grpo.methods.dpo
    import thai_grpo.methods.grpo
    import thai_grpo.methods.ppo
    import thai_grpo.methods.rloo

    calls = []
    for module in (thai_grpo.methods.grpo, thai_grpo.methods.rloo, thai_grpo.methods.dpo, thai_grpo.methods.ppo):
        monkeypatch.setattr(module, "train", lambda spec, _m=module.__name__: calls.append((_m, spec)) or {"steps": []})
    config = load()

    def spec(variant, **extra):
        return RunSpec(run=variant, plan=variant_plan(config, variant), base_dir=Path("base"), adapter_dir=Path("sft"),
                       train_rows=[{"q": 1}], system_prompt="SYS", out_dir=Path("out"), checkpoint_dir=Path("ckpt"),
                       seed=7, training=TRAINING, **extra)

    for variant in ("grpo", "rloo", "dpo"):
        result = train_variant(spec(variant, pairs=[{"pair": 1}]))
        assert result["variant"] == variant and result["method"] == variant
    (grpo_module, grpo_spec), (rloo_module, rloo_spec), (dpo_module, dpo_spec) = calls
    assert (grpo_module, rloo_module, dpo_module) == tuple(f"thai_grpo.methods.{m}" for m in ("grpo", "rloo", "dpo"))
    assert grpo_spec.plan["grpo_args"]["loss_type"] == "grpo" and rloo_spec.plan["rloo"] == {"beta": 0.001}  # KL matched
    assert dpo_spec.pairs == [{"pair": 1}] and dpo_spec.plan["dpo"]["beta"] == 0.1
    with pytest.raises(ValueError, match="needs the preference pairs"):
        train_variant(spec("dpo"))
    result = train_variant(spec("ppo", reward_dir=Path("rm")))
    ppo_module, ppo_spec = calls[-1]
    assert result["method"] == "ppo" and ppo_module == "thai_grpo.methods.ppo"
    assert ppo_spec.reward_dir == Path("rm")
    assert ppo_spec.plan["ppo"]["num_ppo_epochs"] == config["variants"]["ppo"]["ppo"]["num_ppo_epochs"]


@pytest.mark.parametrize("variant, message", [
    ({"method": "dpo", "dpo": {"betta": 0.1}}, "variants.v.dpo.betta is not a field of TRL DPOConfig: did you mean beta?"),
    ({"method": "rloo", "grpo": {"loss_type": "dr_grpo"}}, "variants.v.grpo.loss_type has no RLOO counterpart"),
    ({"dpo": {"beta": 0.1}}, "variants.v.method='grpo': a variant with a dpo: section needs method: dpo; add it or "
                             "remove the section"),
    ({"method": "dpo", "rloo": {"beta": 0.1}}, "variants.v.method='dpo': a variant with an rloo: section needs method: "
                                               "rloo"),
    ({"method": "rloo", "ppo": {"score": "verifier"}}, "variants.v.method='rloo': a variant with a ppo: section needs "
                                                       "method: ppo"),
    ({"method": "ppo", "ppo": {"kl_coeff": 0.1}}, "variants.v.ppo.kl_coeff is not a field of PPO's settings: did you "
                                                  "mean kl_coef?"),
    ({"method": "ppo", "ppo": {"batch_size": 10, "num_mini_batches": 3}}, "variants.v.ppo.batch_size=10 is not a "
                                                                         "multiple of num_mini_batches=3"),
    ({"method": "ppo", "ppo": {"num_mini_batches": 2}}, "variants.v.ppo: 'batch_size' is a dependency of "
                                                        "'num_mini_batches'"),
    ({"method": "ppo", "ppo": {"score": "people"}}, "variants.v.ppo.score='people': 'people' is not one of "
                                                    "['reward_model', 'verifier']"),
    ({"method": "ppo", "ppo": {"kl_estimator": "k3"}}, "variants.v.ppo.kl_estimator='k3': only k1 (TRL's default) is "
                                                       "implemented"),
    ({"method": "ppo", "ppo": {"lr_scheduler_type": "cosine"}}, "variants.v.ppo.lr_scheduler_type='cosine': 'cosine' "
                                                                "is not one of ['linear', 'constant']"),
    ({"method": "ppo", "ppo": {"whiten_rewards": True}}, "variants.v.ppo.whiten_rewards=True: not implemented"),
    ({"method": "ppo", "ppo": {"chunk_floats": 0}}, "variants.v.ppo.chunk_floats=0: a positive integer or auto"),
    ({"method": "ppo", "ppo": {"chunk_floats": "auto", "score": "verifier"}}, None),
])
def test_method_sections_are_checked(variant, message):
    config = load()
    config["variants"]["v"] = variant
    if message is None:
        checked_config(config)
        return
    with pytest.raises(ConfigError) as refused:
        checked_config(config)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_the_schema_lists_the_fields_of_ppos_settings():
    """PPOSettings holds PPO's defaults, the schema its fields' allowed values: the same names."""
    from thai_grpo.methods.settings import PPOSettings

    schema = yaml.safe_load((REPO / "config/schema.yaml").read_text(encoding="utf-8"))
    assert list(schema["$defs"]["ppo"]["properties"]) == [f.name for f in dataclasses.fields(PPOSettings)]


def test_shipped_configs_pass_the_method_checks():
    for name in ("smoke.yaml", "qwen3-0.6b.yaml"):
        check_method_fields(deep_merge(load(), load(name)))
    check_method_fields(load())


# --------------------------------------------------------------------------- results: pitfalls and rows
def test_pitfall_sets_follow_what_each_variant_changes():
    config = load()
    plans = {name: variant_plan(config, name) for name in config["variants"]}
    assert pitfall_sets(plans) == {"group_size": ["grpo", "g2", "g4"], "temperature": ["grpo", "temp0.3"],
                                   "reward_hacking": ["grpo", "lenient_format"], "clipping": ["grpo", "two_passes"]}
    methods_only = {n: p for n, p in plans.items() if p["group"] == "method"}
    assert pitfall_sets(methods_only) == {"group_size": [], "temperature": [], "reward_hacking": [], "clipping": []}


def test_pitfall_sets_use_what_a_variant_sets():
    config = deep_merge(load(), load("smoke.yaml"))  # smoke's grpo already has G = 4, like g4
    plans = {n: {**variant_plan(config, n), "overrides": config["variants"][n]} for n in config["variants"]}
    assert pitfall_sets(plans)["group_size"] == ["grpo", "g2", "g4"]
    assert pitfall_sets({n: p for n, p in plans.items() if n != "grpo"})["temperature"] == ["temp0.3"]


def test_method_rows_one_per_method_with_paired_test_and_no_pitfalls():
    config = load()
    plans = {name: variant_plan(config, name) for name in config["variants"]}
    scores = {m: {} for m in ["base", "sft", "grpo", "dr_grpo", "rloo", "dpo", "g2"]}
    trains = {v: {"steps": [{"generated_tokens": 10}] * 2, "parameters": {"trainable": 5}}
              for v in ["grpo", "dr_grpo", "rloo", "dpo", "g2"]}
    paired = {f"{m}_vs_sft": {"mean_diff": 0.1} for m in ["grpo", "dr_grpo", "rloo", "dpo", "g2"]}
    pairs = {"pairs": 3, "problems": 8, "samples_per_problem": 4, "all_right": 1, "all_wrong": 4,
             "generated_tokens": 99}
    rows = method_rows(scores, trains, {"train-rloo": 12.0, "preference_pairs": 3.0}, 5, plans, pairs, paired)
    assert [r["method"] for r in rows] == ["Base (no adapter)", "SFT", "PPO", "DPO", "GRPO", "Dr.GRPO", "RLOO"]
    by = {r["method"]: r for r in rows}
    assert not by["PPO"]["run"] and by["RLOO"]["train_seconds"] == 12.0
    assert by["Dr.GRPO"]["paired_vs_sft"] == {"mean_diff": 0.1} and by["SFT"]["paired_vs_sft"] is None
    assert by["DPO"]["generated_tokens"] == 99 and "only rank answers that exist" in by["DPO"]["note"]
    assert by["GRPO"]["generated_tokens"] == 20


def test_ppo_rows_count_the_reward_model_and_the_ablation_is_a_row_too():
    config = load()
    plans = {name: variant_plan(config, name) for name in ("ppo", "ppo_verifier")}
    steps = [{"generated_tokens": 10, "value_loss": 0.08, "explained_variance": -1.5},
             {"generated_tokens": 10, "value_loss": 0.01, "explained_variance": 0.3}]
    parameters = {"trainable": 7, "policy_trainable": 3, "value_trainable": 4}
    trains = {"ppo": {"steps": steps, "parameters": parameters, "score": "reward_model"},
              "ppo_verifier": {"steps": steps, "parameters": parameters, "score": "verifier"}}
    scores = {m: {} for m in ["sft", "ppo", "ppo_verifier"]}
    reward_model = {"train": {"pairs": 110, "accuracy": 0.72}, "heldout": {"pairs": 179, "accuracy": 0.46},
                    "parameters": {"trainable": 5}}
    seconds = {"train-ppo": 100.0, "reward_model": 10.0, "train-ppo_verifier": 90.0, "preference_pairs": 3.0}
    memory = {"train-ppo": 2000.0, "reward_model": 2500.0, "train-ppo_verifier": 1900.0, "sft_adapter": 800.0}
    rows = method_rows(scores, trains, seconds, 5, plans, {"generated_tokens": 99}, {}, peak_memory=memory,
                       reward_model=reward_model)
    by = {r["method"]: r for r in rows}
    ppo, verifier = by["PPO"], by["PPO (ppo_verifier)"]  # group: ablation is a row (of the pitfalls report)
    assert ppo["train_seconds"] == 110.0 and ppo["reward_model_seconds"] == 10.0 and ppo["sampling_seconds"] == 3.0
    assert ppo["trainable_parameters"] == 7 and ppo["trainable_detail"] == {"policy": 3, "value": 4}
    assert ppo["reward_model_trainable"] == 5 and ppo["peak_memory_mb"] == 2500.0  # the larger of its two jobs
    assert ppo["generated_tokens"] == 20 + 99 and ppo["models_in_memory"].startswith("4 ")
    assert "accuracy 0.46 on 179 held-out pairs" in ppo["note"] and "not by people" in ppo["note"]
    assert "explained variance -1.50 -> 0.30" in ppo["note"]
    assert verifier["train_seconds"] == 90.0 and verifier.get("reward_model_seconds") is None
    assert verifier["peak_memory_mb"] == 1900.0 and verifier["models_in_memory"].startswith("3 ")
    assert verifier["generated_tokens"] == 20 and verifier["human_labels"].startswith("none")
    assert by["SFT"]["peak_memory_mb"] == 800.0


def test_benchmark_readers_take_a_column_and_skip_what_is_not_a_number(tmp_path):
    from thai_grpo.report.results import benchmark_column

    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (tmp_path / "train-ppo.tsv").write_text(header + "10.0\t0:00:10\t2159.78\t1\t1\t1\t0\t0\t50\t9\n"
                                            "12.0\t0:00:12\t2000.0\t1\t1\t1\t0\t0\t50\t9\n")
    (tmp_path / "split.tsv").write_text(header + "0.5\t0:00:00\t-\t-\t-\t-\t-\t-\t-\t0\n")
    assert benchmark_column(tmp_path, "s") == {"split": 0.5, "train-ppo": 11.0}
    assert benchmark_column(tmp_path, "max_rss") == {"train-ppo": 2079.89}


def test_scope_benchmarks_keep_only_the_reports_models():
    seconds = {"dataset": 1, "train-grpo": 2, "train-g2": 3, "sample-g2": 4, "figures": 5, "figures-pitfalls": 6}
    assert scope_benchmarks(seconds, ["base", "grpo"]) == {"dataset": 1, "train-grpo": 2, "figures": 5}


def test_scope_benchmarks_keep_the_configured_second_heldout_sets():
    seconds = {"dataset": 1, "extra_heldout-mgsm_th": 2, "sample_extra-mgsm_th-grpo": 3, "score_extra-mgsm_th-g2": 4,
               "extra_heldout-old": 5, "sample_extra-old-grpo": 6}
    assert scope_benchmarks(seconds, ["grpo"], ["mgsm_th"]) == {"dataset": 1, "extra_heldout-mgsm_th": 2,
                                                                 "sample_extra-mgsm_th-grpo": 3}
    assert scope_benchmarks(seconds, ["grpo"]) == {"dataset": 1}


def test_extra_set_results_title_source_counts_and_paired_tests():
    def scores(correct):
        return {"per_problem_correct": correct, "n_samples": 4, "pass@1": {"estimate": sum(correct) / 16}}

    config = {"eval": {"extra_sets": {"mgsm_th": {"title": "MGSM Thai", "source": "hub", "path": "juletxara/mgsm",
                                                  "name": "th", "split": "test", "revision": "main"}}}}
    stats = {"source_rows": 5, "duplicates_removed": 0, "seen_in_training_dropped": 1, "problems": 4}
    by_model = {"base": scores([0, 0, 1, 0]), "sft": scores([1, 0, 2, 0]), "grpo": scores([3, 1, 2, 0])}
    section = extra_set_results(config, {"mgsm_th": {"stats": stats, "scores": by_model}}, n_boot=200, seed=0)
    mgsm = section["mgsm_th"]
    assert mgsm["title"] == "MGSM Thai" and mgsm["data"] == stats and mgsm["eval"] == by_model
    assert mgsm["source"] == {"source": "hub", "path": "juletxara/mgsm", "name": "th", "split": "test",
                              "revision": "main"}
    assert list(mgsm["paired_tests"]) == ["grpo_vs_sft"]
    assert mgsm["paired_tests"]["grpo_vs_sft"]["mean_diff"] == pytest.approx((2 + 1 + 0 + 0) / 4 / 4)
    assert extra_set_results({"eval": {}}, {}, 200, 0) == {}


# --------------------------------------------------------------------------- DPO and RLOO on a tiny model
@pytest.mark.slow
def test_dpo_and_rloo_train_a_tiny_adapter(tiny_model_dir, tiny_adapter_dir, synthetic_rows, tmp_path):
    import thai_grpo.methods.dpo as dpo_method
    import thai_grpo.methods.rloo as rloo_method
    from thai_grpo.data.problems import normalize_rows
    from thai_grpo.data.prompts import SYSTEM_PROMPT, build_prompt

    from thai_grpo.data.prompts import prompt_token_ids
    from thai_grpo.models.loading import load_tokenizer

    rows, _ = normalize_rows(synthetic_rows[:4], "translated_question", "translated_answer")
    tokenizer = load_tokenizer(tiny_model_dir)

    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    pairs = [{"prompt": build_prompt(r["question"]), "id": r["id"],
              "chosen": [{"role": "assistant", "content": f"<think>x</think>\n{r['answer']}"}],
              "rejected": [{"role": "assistant", "content": f"<think></think>\n{r['answer'] + 1}"}],
              "prompt_ids": prompt_token_ids(tokenizer, [r["question"]], SYSTEM_PROMPT)[0],
              "chosen_ids": ids(f"<think>x</think>\n{r['answer']}"),
              "rejected_ids": ids(f"<think></think>\n{r['answer'] + 1}"), "completion_budget": 8} for r in rows]
    grpo = {"num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 8, "max_steps": 2,
            "learning_rate": 1e-3, "beta": 0.04, "loss_type": "grpo", "scale_rewards": "group", "save_steps": 1}
    dpo_plan = plan("dpo", grpo, dpo={"per_device_train_batch_size": 2, "num_train_epochs": 1})
    rloo_plan = plan("rloo", grpo, ["correct", "format_lenient", "thai"])

    def train_dpo(name, pairs_of_run):
        return dpo_method.train(run_spec(tmp_path, name, tiny_model_dir, tiny_adapter_dir, dpo_plan, pairs=pairs_of_run))

    def train_rloo(name):
        return rloo_method.train(run_spec(tmp_path, name, tiny_model_dir, tiny_adapter_dir, rloo_plan, rows))

    dpo = train_dpo("dpo", pairs)
    assert [s["step"] for s in dpo["steps"]] == [1, 2]  # one pass over 4 pairs, not GRPO's max_steps
    assert {"loss", "reward_margin", "reward_accuracy"} <= set(dpo["steps"][0])
    assert (tmp_path / "dpo" / "adapter_config.json").is_file() and not (tmp_path / "ckpt-dpo").exists()
    skipped = train_dpo("dpo0", [])
    assert skipped["steps"] == [] and "no preference pairs" in skipped["skipped"]
    assert (tmp_path / "dpo0" / "adapter_config.json").is_file()

    rloo = train_rloo("rloo")
    assert [s["step"] for s in rloo["steps"]] == [1, 2]
    assert rloo["dropped_grpo_fields"] == ["loss_type", "scale_rewards"]
    for key in ("frac_groups_nonzero_std", "accuracy", "empty_think_share", "reward_mean", "kl"):
        assert key in rloo["steps"][0], key
    assert (tmp_path / "rloo" / "adapter_config.json").is_file()

    # the same inputs and seed give the same adapter, byte for byte
    train_dpo("dpo2", pairs)
    train_rloo("rloo2")
    for name in ("dpo", "rloo"):
        weights = [(tmp_path / run / "adapter_model.safetensors").read_bytes() for run in (name, f"{name}2")]
        assert weights[0] == weights[1], name


# --------------------------------------------------------------------------- what a config change reruns
@pytest.fixture(scope="module")
def placeholder_workflow(tmp_path_factory):
    """A scratch copy whose every output (of rule all and rule pitfalls) is an empty placeholder, marked up to
    date by ``--touch --forceall``: Snakemake's metadata then holds every job's params, as after a real run."""
    return placeholder_run(copy_workflow(tmp_path_factory.mktemp("variants")), "all", "pitfalls",
                           "--configfile", "config/smoke.yaml")


@pytest.mark.slow
def test_changing_one_variant_reruns_only_that_variant(placeholder_workflow):
    for target in ("all", "pitfalls"):
        assert scheduled_jobs(snakemake(placeholder_workflow, target, "-n", "--configfile", "config/smoke.yaml")) == {}
    change = ["--configfile", "config/smoke.yaml", "--config", 'variants={"dr_grpo":{"grpo":{"beta":0.08}}}']
    dry = snakemake(placeholder_workflow, "-n", *change)
    assert scheduled_jobs(dry) == {"train": 1, "sample": 1, "score": 1, "results": 1, "figures": 1, "report": 1,
                                   "all": 1}
    out = dry.stdout + dry.stderr
    assert "results/runs/dr_grpo/train.json" in out and "results/runs/grpo/train.json" not in out
    assert "results/eval/dr_grpo/samples.jsonl" in out and "results/eval/rloo/samples.jsonl" not in out


@pytest.mark.slow
def test_adding_a_second_heldout_set_resamples_nothing_on_the_main_one(placeholder_workflow):
    extra = write_extra_set_config(placeholder_workflow)
    jobs = scheduled_jobs(snakemake(placeholder_workflow, "-n", "--configfile", "config/smoke.yaml", str(extra)))
    models = len(load("smoke.yaml")["eval"]["models"])
    assert jobs == {"extra_heldout": 1, "sample_extra": models, "score_extra": models, "results": 1, "figures": 1,
                    "report": 1, "all": 1}


@pytest.mark.slow
def test_a_pitfall_variant_is_built_by_the_pitfalls_target_only(placeholder_workflow):
    change = ["--configfile", "config/smoke.yaml", "--config", 'variants={"temp0.3":{"grpo":{"temperature":0.5}}}']
    assert scheduled_jobs(snakemake(placeholder_workflow, "-n", *change)) == {}
    jobs = scheduled_jobs(snakemake(placeholder_workflow, "pitfalls", "-n", *change))
    assert jobs == {"train": 1, "sample": 1, "score": 1, "sample_own_temperature": 1, "score_own_temperature": 1,
                    "results_pitfalls": 1, "figures_pitfalls": 1, "report_pitfalls": 1, "pitfalls": 1}


@pytest.mark.slow
def test_only_a_variant_trained_at_another_temperature_is_also_scored_at_its_own(placeholder_workflow):
    summary = snakemake(placeholder_workflow, "--summary", "pitfalls", "--configfile", "config/smoke.yaml")
    assert summary.returncode == 0, summary.stderr[-3000:]
    own = [line.split("\t")[0] for line in summary.stdout.splitlines() if "/own_temperature/" in line]
    assert sorted(own) == ["results/eval/temp0.3/own_temperature/samples.jsonl",
                           "results/eval/temp0.3/own_temperature/scores.json",
                           "results/eval/temp0.3/own_temperature/sizes.json"]  # the batch it was sampled with


@pytest.mark.slow
def test_the_seeds_target_trains_only_the_new_seeds_of_the_rl_methods(placeholder_workflow):
    dry = snakemake(placeholder_workflow, "seeds", "-n", "--configfile", "config/smoke.yaml")
    seeds = [s for s in load()["seeds"]["training"] if s != load()["seed"]]
    rl = [v for v, o in {**load()["variants"]}.items()
          if o.get("group", "method") == "method" and o.get("method", "grpo") != "dpo"]
    runs = len(seeds) * len(rl)
    assert scheduled_jobs(dry) == {"train": runs, "sample": runs, "score": runs, "seed_results": 1,
                                   "report_seeds": 1, "seeds": 1}
    out = dry.stdout + dry.stderr
    for variant in rl:  # the default seed's run is the existing one: reused, not retrained
        assert f"results/runs/{variant}-seed{seeds[0]}/adapter" in out and f"results/runs/{variant}/adapter" not in out
    assert "results/runs/dpo-seed" not in out and "results/runs/g2-seed" not in out


@pytest.mark.slow
def test_the_main_report_shows_the_seed_study_once_it_exists(placeholder_workflow):
    study = placeholder_workflow / "results" / "seeds" / "results.json"
    study.parent.mkdir(parents=True, exist_ok=True)
    study.touch()
    try:
        jobs = scheduled_jobs(snakemake(placeholder_workflow, "-n", "--configfile", "config/smoke.yaml"))
        assert jobs == {"report": 1, "all": 1}
    finally:
        study.unlink()
