"""Bad configs are refused before any work, with one line naming the key, the value and the fix."""

import copy
import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from thai_grpo.workflow import (TRL_LOSS_TYPES, check_config, check_trainer_fields, coerce_scalars, deep_merge,
                                variant_settings)
from thai_grpo.core.config import ConfigError

REPO = Path(__file__).resolve().parents[1]
SCHEMA = str(REPO / "config" / "schema.yaml")


def load(name="config.yaml"):
    return yaml.safe_load((REPO / "config" / name).read_text())


def full_check(config):
    validate(config, SCHEMA)
    check_config(config)
    check_trainer_fields(config)


@pytest.mark.parametrize("name", ["config.yaml", "smoke.yaml", "qwen3-0.6b.yaml"])
def test_shipped_configs_pass(name):
    base = load()
    full_check(base if name == "config.yaml" else deep_merge(base, load(name)))


def with_change(path, value):
    config = load()
    node = config
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return config


@pytest.mark.parametrize("path, value, message", [
    ("grpo.num_generations", 1, r"grpo.num_generations=1: GRPO needs at least 2"),
    ("grpo.per_device_train_batch_size", 60, r"= 60 is not divisible by num_generations=8"),
    ("grpo.gradient_accumulation_steps", 3, None),
    ("grpo.temperature", 0.0, r"grpo.temperature=0.0 must be > 0"),
    ("grpo.beta", -0.04, r"grpo.beta=-0.04 must be >= 0"),
    ("grpo.loss_type", "ppo", r"grpo.loss_type='ppo' is not a TRL loss type"),
    ("grpo.scale_rewards", "std", r"grpo.scale_rewards='std': use one of"),
    ("eval.ks", [1, 16], r"k=16 > eval.num_samples=8"),
    ("eval.temperature", -1.0, r"eval.temperature=-1.0 must be > 0"),
    ("eval.models", ["base", "sac"], r"eval.models has 'sac'"),
    ("data.heldout_size", 100_000, r"exceeds data.synthetic.num_problems"),
    ("grpo.betta", 0.04, r"grpo.betta is not a field of TRL GRPOConfig"),
    ("sft.args.learning_rat", 1e-3, r"sft.args.learning_rat is not a field of TRL SFTConfig"),
    ("base.pretrain.max_step", 10, r"base.pretrain.max_step is not a field of transformers TrainingArguments"),
    ("grpo.max_length", 256, r"grpo.max_length is not a field of TRL GRPOConfig"),
])
def test_bad_values_get_a_one_line_message(path, value, message):
    config = with_change(path, value)
    if message is None:  # 64 x 3 = 192 is divisible by 8: a legal batch
        full_check(config)
        return
    with pytest.raises(ConfigError, match=message) as caught:
        full_check(config)
    assert "\n" not in str(caught.value)


def real_config():
    return deep_merge(load(), load("qwen3-0.6b.yaml"))


@pytest.mark.parametrize("dtype, section, flag, value, refused", [
    ("float16", "grpo", "bf16", True, r"grpo.bf16=True would train float16 weights under bfloat16 autocast"),
    ("bfloat16", "reward_model.args", "fp16", True, r"reward_model.args.fp16=True would train bfloat16 weights "
                                                    r"under float16 autocast"),
    ("float16", "variants.dpo.dpo", "fp16", False, r"fp16=False would train float16 weights without float16 autocast"),
    ("float32", "sft.args", "bf16", True, r"sft.args.bf16=True would train float32 weights under bfloat16 autocast"),
    ("auto", "grpo", "fp16", True, r"grpo.fp16=True: the trainers' fp16/bf16 follow base.dtype, and auto picks them "
                                   r"per card"),
    ("bfloat16", "grpo", "bf16", True, None),  # the same precision, said twice
    ("float16", "grpo", "bf16", False, None),
])
def test_one_precision_per_stage_the_trainers_flags_follow_the_frozen_weights(dtype, section, flag, value, refused):
    config = with_change("base.dtype", dtype)
    node = config
    for key in section.split("."):
        node = node.setdefault(key, {})
    node[flag] = value
    if refused is None:
        full_check(config)
        return
    with pytest.raises(ConfigError, match=refused) as caught:
        full_check(config)
    assert "\n" not in str(caught.value)


def test_every_trainer_reports_to_the_one_tracker_whose_package_is_installed(monkeypatch):
    import importlib.util

    config = load()
    validate(config, SCHEMA)  # fills the schema's defaults
    assert config["training"] == {"max_lost_update_share": 0.0, "report_to": "none"}
    full_check(with_change("training.report_to", "none"))
    installed = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "wandb" else installed(name))
    with pytest.raises(ConfigError, match=r"training.report_to=wandb: the wandb package is not installed here"):
        full_check(with_change("training.report_to", "wandb"))
    with pytest.raises(ConfigError, match=r"grpo.report_to: every trainer reports to training.report_to"):
        full_check(with_change("grpo.report_to", "tensorboard"))
    with pytest.raises(WorkflowError):  # not one of TRL's trackers
        validate(with_change("training.report_to", "mlflow"), SCHEMA)


@pytest.mark.parametrize("where", ["grpo", "variants.grpo_fast.grpo", "variants.dr_grpo.grpo"])
def test_vllm_rollouts_are_refused_with_the_reasons(where):
    """TRL 1.16's colocated vLLM would change the experiment (16-bit merge/unmerge drift, importance-sampling
    correction, a seed per process): refused in every GRPO section of the real config, in one line."""
    config = real_config()
    node = config
    for key in where.split("."):
        node = node.setdefault(key, {})
    node["use_vllm"] = True
    with pytest.raises(ConfigError, match=rf"{re.escape(where)}\.use_vllm: true is refused") as caught:
        check_config(config)
    message = str(caught.value)
    assert "\n" not in message
    for reason in ("does not round-trip in 16 bits", "vllm_importance_sampling_correction", "seed"):
        assert reason in message


@pytest.mark.parametrize("dtype, refused", [("bfloat16", True), ("float16", True), ("auto", True),
                                            ("float32", False)])
def test_vllm_held_out_sampling_only_in_the_evaluation_precision(dtype, refused):
    config = real_config()
    config["eval"].update(use_vllm=True, dtype=dtype)
    if not refused:
        check_config(config)
        return
    with pytest.raises(ConfigError, match=rf"eval.use_vllm: true with eval.dtype={dtype}") as caught:
        check_config(config)
    assert "eval.dtype: float32" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("path, value, message", [
    ("data.source", "huggingface", "is not one of"),
    ("data.train_size", "many", "is not of type 'integer'"),
    ("data.unknown_knob", 1, "Additional properties are not allowed"),
    ("eval.num_samples", 0, "less than the minimum"),
    ("eval.extra_sets", {"mgsm th": {"path": "juletxara/mgsm"}}, "does not match"),
    ("eval.extra_sets", {"mgsm_th": {"name": "th"}}, "'path' is a required property"),
    ("eval.extra_sets", {"mgsm_th": {"path": "juletxara/mgsm", "answer_col": "x"}}, "Additional properties"),
    ("eval.extra_sets", {"mgsm_th": {"path": "juletxara/mgsm", "source": "synthetic"}}, "is not one of"),
    ("eval.extra_sets", ["juletxara/mgsm"], "is not of type 'object'"),
])
def test_schema_refuses_unknown_keys_and_wrong_types(path, value, message):
    with pytest.raises(WorkflowError, match=message):
        validate(with_change(path, value), SCHEMA)


def test_loss_types_match_installed_trl():
    from trl import GRPOConfig

    help_text = {f.name: f for f in dataclasses.fields(GRPOConfig)}["loss_type"].metadata["help"]
    supported = help_text.split("Supported values are", 1)[1].split(".", 1)[0]
    assert set(re.findall(r"'(\w+)'", supported)) == set(TRL_LOSS_TYPES)


def test_a_misspelt_reward_is_refused_in_one_line_naming_the_registry():
    config = load()
    config["variants"]["hack_lenient"] = {"rewards": ["correct", "format_lenint", "thai"]}
    with pytest.raises(ConfigError, match=r"^variants.hack_lenient.rewards: unknown reward 'format_lenint'") as caught:
        check_config(config)
    assert "thai_grpo.core.rewards.REWARDS" in str(caught.value) and "\n" not in str(caught.value)


def test_cli_strings_become_numbers():
    assert coerce_scalars({"grpo": {"beta": "0.05", "loss_type": "grpo", "n": "8", "flag": "true"}}) == \
        {"grpo": {"beta": 0.05, "loss_type": "grpo", "n": 8, "flag": True}}


def test_variants_override_only_what_they_name():
    config = load()
    config["variants"]["dr_grpo"] = {"grpo": {"loss_type": "dr_grpo", "scale_rewards": "none"}}
    settings = variant_settings(config, "dr_grpo")
    assert settings["grpo"]["loss_type"] == "dr_grpo" and settings["grpo"]["beta"] == config["grpo"]["beta"]
    assert config["grpo"]["loss_type"] == "grpo"
    with pytest.raises(ConfigError, match="variant 'nope' is not defined"):
        variant_settings(config, "nope")


def test_reserved_variant_names_are_refused():
    config = copy.deepcopy(load())
    config["variants"]["sft"] = {}
    with pytest.raises(ConfigError, match="variants.sft"):
        check_config(config)


def test_extra_sets_absent_offline_and_mgsm_thai_in_the_real_config():
    """The offline configs evaluate no second held-out set; the real one evaluates MGSM Thai from its original
    file (data/mgsm), with the schema's defaults filled in for what an entry leaves out."""
    for name in ["config.yaml", "smoke.yaml"]:
        assert "extra_sets" not in load(name).get("eval", {}), name
    real = deep_merge(load(), load("qwen3-0.6b.yaml"))
    validate(real, SCHEMA)
    mgsm = real["eval"]["extra_sets"]["mgsm_th"]
    assert {key: mgsm.get(key) for key in ("source", "path", "name", "question_column", "answer_column")} == \
        {"source": "local", "path": "data/mgsm/mgsm_th.tsv", "name": None, "question_column": "question",
         "answer_column": "answer_number"}
    minimal = with_change("eval.extra_sets", {"mgsm_th": {"path": "juletxara/mgsm", "name": "th"}})
    validate(minimal, SCHEMA)
    assert minimal["eval"]["extra_sets"]["mgsm_th"] == {"path": "juletxara/mgsm", "name": "th", "source": "hub",
                                                        "split": "test", "revision": "main",
                                                        "question_column": "question", "answer_column": "answer_number"}


def test_evaluation_samples_with_the_training_budget_unless_told_otherwise():
    from thai_grpo.workflow import eval_settings

    config = {"grpo": {"max_completion_length": 80}, "eval": {"models": ["sft"], "temperature": 1.0}}
    assert eval_settings(config) == {"temperature": 1.0, "max_new_tokens": 80}
    config["eval"]["max_new_tokens"] = 96
    assert eval_settings(config)["max_new_tokens"] == 96
    assert eval_settings({"eval": {}})["max_new_tokens"] == 256  # TRL's own default budget


def test_the_large_k_experiment_samples_like_the_evaluation_with_its_own_n():
    from thai_grpo.workflow import eval_settings, passk_settings

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    del config["passk"]  # the schema's defaults
    config["grpo"]["max_completion_length"] = 80
    config["eval"].update(temperature=1.0, num_samples=8, batch_size=64, seed=7, max_new_tokens=80)
    validate(config, str(REPO / "config" / "schema.yaml"))
    assert passk_settings(config) == {**eval_settings(config), "num_samples": 64, "batch_size": 8, "ks": [1, 8, 64],
                                      "problems": 100}
    assert eval_settings(config)["temperature"] == 1.0 and eval_settings(config)["seed"] == 7
    config["passk"].update(num_samples=16, problems=20)
    assert (passk_settings(config)["num_samples"], passk_settings(config)["problems"]) == (16, 20)
