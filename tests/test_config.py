"""Bad configs are refused before any work, with one line naming the key, the value and the fix."""

import copy
import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from thai_grpo.workflow import checked_config, coerce_scalars, deep_merge, variant_settings
from thai_grpo.core.config import ConfigError

REPO = Path(__file__).resolve().parents[1]
SCHEMA = str(REPO / "config" / "schema.yaml")


def load(name="config.yaml"):
    return yaml.safe_load((REPO / "config" / name).read_text())


def full_check(config):
    return checked_config(config, SCHEMA)


def refusal(config) -> str:
    """The one line a config is refused with."""
    with pytest.raises(ConfigError) as caught:
        full_check(config)
    assert "\n" not in str(caught.value)
    return str(caught.value)


@pytest.mark.parametrize("name", ["config.yaml", "smoke.yaml", "qwen3-0.6b.yaml"])
def test_shipped_configs_pass(name):
    base = load()
    full_check(base if name == "config.yaml" else deep_merge(base, load(name)))


def with_change(path, value, config=None):
    config = load() if config is None else config
    node = config
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return config


@pytest.mark.parametrize("path, value, message", [
    ("grpo.num_generations", 1, "grpo.num_generations=1: 1 is less than the minimum of 2; G, completions per prompt: "
                                "at least 2 to compare them"),
    ("grpo.per_device_train_batch_size", 60, "grpo: per_device_train_batch_size x gradient_accumulation_steps = 60 is "
                                             "not divisible by num_generations=8"),
    ("grpo.gradient_accumulation_steps", 3, None),  # 64 x 3 = 192 is divisible by 8: a legal batch
    ("grpo.temperature", 0.0, "grpo.temperature=0.0: 0.0 is less than or equal to the minimum of 0; Rollout "
                              "temperature, > 0: sampling at 0 makes every group identical"),
    ("grpo.beta", -0.04, "grpo.beta=-0.04: -0.04 is less than the minimum of 0; KL weight, >= 0"),
    ("grpo.loss_type", "ppo", "grpo.loss_type='ppo': 'ppo' is not one of ['grpo', 'dr_grpo', 'dapo'"),
    ("grpo.scale_rewards", "std", "grpo.scale_rewards='std': 'std' is not one of ['group', 'batch', 'none', True, "
                                  "False]"),
    ("grpo.reference", "ref", "grpo.reference='ref': 'ref' is not one of ['sft', 'base']"),
    ("variants.dr_grpo.grpo.temperature", 0, "variants.dr_grpo.grpo.temperature=0: 0 is less than or equal to the "
                                             "minimum of 0"),
    ("eval.ks", [1, 16], "eval.ks=[1, 16] has k=16 > eval.num_samples=8: pass@k needs n >= k"),
    ("eval.temperature", -1.0, "eval.temperature=-1.0: -1.0 is less than or equal to the minimum of 0; Sampling "
                               "temperature, > 0"),
    ("eval.batch_size", 0, "eval.batch_size=0: use a positive integer (problems per generate call) or auto"),
    ("passk.batch_size", "big", "passk.batch_size='big': use a positive integer (problems per generate call) or auto"),
    ("passk.batch_size", "auto", None),
    ("eval.models", ["base", "sac"], "eval.models has 'sac', which names no model here: use one of ['base', "),
    ("chains.models", ["sft", "sac"], "chains.models has 'sac', which names no model here: use one of ["),
    ("data.heldout_size", 100_000, "data: train_size=128 + heldout_size=100000 + sft_size=800 = 100928 exceeds "
                                   "data.synthetic.num_problems"),
    ("grpo.betta", 0.04, "grpo.betta is not a field of TRL GRPOConfig: did you mean beta?"),
    ("sft.args.learning_rat", 1e-3, "sft.args.learning_rat is not a field of TRL SFTConfig"),
    ("base.pretrain.max_step", 10, "base.pretrain.max_step is not a field of transformers TrainingArguments"),
    ("grpo.max_length", 256, "grpo.max_length is not a field of TRL GRPOConfig"),
    ("data.source", "huggingface", "data.source='huggingface': 'huggingface' is not one of ['synthetic', 'hub', "
                                   "'local']; synthetic = generated"),
    ("data.train_size", "many", "data.train_size='many': 'many' is not of type 'integer'"),
    ("data.unknown_knob", 1, "data.unknown_knob is not a field of data in config/schema.yaml"),
    ("eval.num_samples", 0, "eval.num_samples=0: 0 is less than the minimum of 1"),
    ("eval.extra_sets", {"mgsm th": {"path": "juletxara/mgsm"}}, "eval.extra_sets.mgsm th: 'mgsm th' does not "
                                                                 "match"),
    ("eval.extra_sets", {"mgsm_th": {"name": "th"}}, "eval.extra_sets.mgsm_th: 'path' is a required property"),
    ("eval.extra_sets", {"mgsm_th": {"path": "juletxara/mgsm", "answer_col": "x"}},
     "eval.extra_sets.mgsm_th.answer_col is not a field of eval.extra_sets.mgsm_th in config/schema.yaml: did you "
     "mean answer_column?"),
    ("eval.extra_sets", {"mgsm_th": {"path": "juletxara/mgsm", "source": "synthetic"}},
     "eval.extra_sets.mgsm_th.source='synthetic': 'synthetic' is not one of ['hub', 'local']"),
    ("eval.extra_sets", ["juletxara/mgsm"], "eval.extra_sets=['juletxara/mgsm']: ['juletxara/mgsm'] is not of type "
                                            "'object'"),
    ("variants.sft", {}, "variants.sft: 'base' and 'sft' name the starting models; rename the variant"),
    ("variants.grpo-seed3", {}, "variants.grpo-seed3: a name ending in '-seed<digits>' reads as a seeded run of "
                                "another variant; rename it"),
    ("seeds.training", [42, 1, 1], "seeds.training=[42, 1, 1]: [42, 1, 1] has non-unique elements"),
    ("sft.source", "train", "sft.source='train': the shipped SFT adapter was trained on the shipped base: set both"),
    ("base.source", "scratch", "base.source='scratch': the shipped SFT adapter was trained on the shipped base"),
])
def test_bad_values_get_a_one_line_message(path, value, message):
    config = with_change(path, value)
    if message is None:
        full_check(config)
        return
    assert refusal(config).startswith(message)


@pytest.mark.parametrize("changes, message", [
    ({"base.source": "hub", "sft.source": "hub"}, "base.name_or_path='': '' should be non-empty; source hub or local "
                                                  "needs name_or_path: a hub id or a folder"),
    ({"base.source": "scratch", "sft.source": "train", "data.sft_size": 0},
     "data.sft_size=0: 0 is less than the minimum of 1; must be >= 1 when sft.source is train or shipped"),
    ({"base.source": "scratch", "sft.source": "train", "data.sft_size": 8}, None),
])
def test_sources_are_refused_where_they_cannot_work_together(changes, message):
    config = load()
    for path, value in changes.items():
        config = with_change(path, value, config)
    if message is None:
        full_check(config)
        return
    assert refusal(config).startswith(message)


def real_config():
    return deep_merge(load(), load("qwen3-0.6b.yaml"))


PRECISION = "one precision per stage: base.dtype {} trains {}; remove the flag"


@pytest.mark.parametrize("dtype, section, flag, value, refused", [
    ("float16", "grpo", "bf16", True, "grpo.bf16=True: " + PRECISION.format("float16", "under float16 autocast")),
    ("bfloat16", "reward_model.args", "fp16", True,
     "reward_model.args.fp16=True: " + PRECISION.format("bfloat16", "under bfloat16 autocast")),
    ("float16", "variants.dpo.dpo", "fp16", False,
     "variants.dpo.dpo.fp16=False: " + PRECISION.format("float16", "under float16 autocast")),
    ("float32", "sft.args", "bf16", True, "sft.args.bf16=True: " + PRECISION.format("float32", "without autocast")),
    ("float16", "base.pretrain", "fp16", True, "base.pretrain.fp16=True: " + PRECISION.format("float32", "without "
                                                                                             "autocast")),
    ("auto", "grpo", "fp16", True, "grpo.fp16=True: with base.dtype auto the trainers' fp16/bf16 are picked per card"),
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
    assert refusal(config).startswith(refused)


def test_every_trainer_reports_to_the_one_tracker_whose_package_is_installed(monkeypatch):
    import importlib.util

    config = load()
    validate(config, SCHEMA)  # fills the schema's defaults
    assert config["training"] == {"max_lost_update_share": 0.0, "report_to": "none"}
    full_check(with_change("training.report_to", "none"))
    installed = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "wandb" else installed(name))
    assert refusal(with_change("training.report_to", "wandb")).startswith(
        "training.report_to=wandb: the wandb package is not installed here")
    for section in ("grpo", "variants.dpo.dpo", "reward_model.args"):
        assert refusal(with_change(f"{section}.report_to", "tensorboard")) == (
            f"{section}.report_to='tensorboard': every trainer reports to training.report_to (PPO's metrics too): "
            "remove it here and set training.report_to")
    assert refusal(with_change("training.report_to", "mlflow")).startswith(  # not one of TRL's trackers
        "training.report_to='mlflow': 'mlflow' is not one of ['none', 'tensorboard', 'trackio', 'wandb']")


@pytest.mark.parametrize("where", ["grpo", "variants.grpo_fast.grpo", "variants.dr_grpo.grpo"])
def test_vllm_rollouts_are_refused_with_the_reasons(where):
    """TRL 1.16's colocated vLLM would change the experiment (16-bit merge/unmerge drift, importance-sampling
    correction, a seed per process): refused in every GRPO section of the real config, in one line."""
    config = real_config()
    node = config
    for key in where.split("."):
        node = node.setdefault(key, {})
    node["use_vllm"] = True
    message = refusal(config)
    assert message.startswith(f"{where}.use_vllm=True: refused: TRL 1.16 syncs a LoRA policy to vLLM")
    for reason in ("does not round-trip in 16 bits", "vllm_importance_sampling_correction", "seed"):
        assert reason in message


def test_vllm_held_out_sampling_is_refused_naming_the_decode_loop():
    config = real_config()
    config["eval"]["use_vllm"] = True
    assert refusal(config).startswith("eval.use_vllm=True: held-out samples come from the pipeline's decode loop, each "
                                      "from its own seed")


def test_loss_types_match_installed_trl():
    from trl import GRPOConfig

    help_text = {f.name: f for f in dataclasses.fields(GRPOConfig)}["loss_type"].metadata["help"]
    supported = help_text.split("Supported values are", 1)[1].split(".", 1)[0]
    schema = yaml.safe_load(Path(SCHEMA).read_text(encoding="utf-8"))
    assert set(re.findall(r"'(\w+)'", supported)) == set(schema["$defs"]["grpo"]["properties"]["loss_type"]["enum"])


def test_a_misspelt_reward_is_refused_in_one_line_naming_the_registry():
    config = load()
    config["variants"]["hack_lenient"] = {"rewards": ["correct", "format_lenint", "thai"]}
    assert refusal(config).startswith("variants.hack_lenient.rewards.1='format_lenint': 'format_lenint' is not one of "
                                      "['correct', 'format', 'format_lenient', 'thai', 'format_checked']; a reward of "
                                      "the registry thai_grpo.core.rewards.REWARDS")


def test_the_schema_names_every_reward_of_the_registry_and_only_those():
    from thai_grpo.core.rewards import REWARDS

    schema = yaml.safe_load(Path(SCHEMA).read_text(encoding="utf-8"))
    assert schema["$defs"]["rewards"]["items"]["enum"] == list(REWARDS)


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
