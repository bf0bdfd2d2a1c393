"""A knob reruns only what reads it: each rule's params hold exactly what its job reads, a study built earlier is not
rebuilt by the default target, and a misspelt key is refused by `snakemake -n` before any job, without TRL."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from configs import config_of

from thai_grpo.core.config import ConfigError, inherited_args
from thai_grpo.workflow import (NOT_INHERITED, check_method_fields, check_trainer_fields, checked_config, deep_merge,
                                known_fields, settings_fingerprint, variant_plan)
from thai_grpo_tools.trainer_fields import installed_fields
from thai_grpo.report.results import add_studies
from workflow import copy_workflow, placeholder_run, run_snakemake, scheduled_jobs

REPO = Path(__file__).resolve().parents[1]
SMOKE = ["--configfile", "config/smoke.yaml"]


def load(name="config.yaml"):
    return config_of() if name == "config.yaml" else config_of(name)


def configs():
    return {"config.yaml": config_of(), "smoke.yaml": config_of("smoke.yaml"),
            "qwen3-0.6b.yaml": config_of("qwen3-0.6b.yaml")}


# --------------------------------------------------------------------------- the checked-in field names
def test_the_checked_in_field_names_are_the_installed_trls():
    """After a TRL or transformers upgrade: `python -m thai_grpo_tools.trainer_fields` rewrites the list."""
    assert known_fields() == installed_fields()


@pytest.mark.parametrize("change, message", [
    ({"grpo": {"betta": 0.08}}, "grpo.betta is not a field of TRL GRPOConfig: did you mean beta?"),
    ({"variants": {"grpo": {"grpo": {"learning_rte": 1e-3}}}},
     "variants.grpo.grpo.learning_rte is not a field of TRL GRPOConfig: did you mean learning_rate?"),
    ({"variants": {"dpo": {"dpo": {"betta": 0.2}}}},
     "variants.dpo.dpo.betta is not a field of TRL DPOConfig: did you mean beta?"),
    ({"variants": {"rloo": {"rloo": {"bta": 0.01}}}},
     "variants.rloo.rloo.bta is not a field of TRL RLOOConfig: did you mean beta?"),
    ({"reward_model": {"args": {"lerning_rate": 1e-3}}},
     "reward_model.args.lerning_rate is not a field of TRL RewardConfig: did you mean learning_rate?"),
    ({"sft": {"args": {"num_train_epoch": 2}}},
     "sft.args.num_train_epoch is not a field of TRL SFTConfig: did you mean num_train_epochs?"),
])
def test_a_misspelt_key_is_refused_in_one_line_naming_the_nearest_field(change, message):
    config = deep_merge(load(), change)
    with pytest.raises(ConfigError) as refused:
        check_trainer_fields(config)
        check_method_fields(config)
    assert str(refused.value) == message


def test_a_misspelt_ppo_key_is_refused_by_the_schema_naming_the_nearest_field():
    with pytest.raises(ConfigError) as refused:
        checked_config(deep_merge(load(), {"variants": {"ppo": {"ppo": {"kl_coeff": 0.1}}}}))
    assert str(refused.value) == "variants.ppo.ppo.kl_coeff is not a field of PPO's settings: did you mean kl_coef?"


# --------------------------------------------------------------------------- plans: what each trainer reads
def unslimmed_plan(config, variant, monkeypatch):
    """The plan as it was before it held only what its method reads: the whole merged grpo section."""
    import thai_grpo.workflow as workflow

    with monkeypatch.context() as patch:
        patch.setattr(workflow, "method_grpo_args", lambda method, grpo: dict(grpo))
        plan = workflow.variant_plan(config, variant)
    return {**plan, "rewards": list(config["variants"][variant].get("rewards", config["rewards"]))}


def dpo_inherited(grpo: dict) -> dict:
    """What DPO's trainer kept of a whole merged grpo section when it filtered the section itself: TRL DPOConfig
    fields (and ours), less ``NOT_INHERITED``. Now it takes its plan's grpo_args as they are."""
    from trl import DPOConfig

    return inherited_args(grpo, {f.name for f in dataclasses.fields(DPOConfig)}, exclude=NOT_INHERITED)[0]


@pytest.mark.parametrize("name", ["config.yaml", "smoke.yaml", "qwen3-0.6b.yaml"])
def test_every_trainer_is_built_with_the_same_config_from_the_slimmed_plan(name, monkeypatch):
    import thai_grpo.workflow as workflow
    from trainer_arguments import stage_arguments

    config = configs()[name]
    for variant in config["variants"]:
        slim = stage_arguments(config, variant)
        with monkeypatch.context() as patch:
            full_plan = unslimmed_plan(config, variant, monkeypatch)
            if full_plan["method"] == "dpo":
                full_plan = {**full_plan, "grpo_args": dpo_inherited(full_plan["grpo_args"])}
            patch.setattr(workflow, "variant_plan", lambda config, v: full_plan)
            full = stage_arguments(config, variant)
        if config["variants"][variant].get("method") in ("dpo", "ppo"):
            assert full_plan["grpo_args"] != variant_plan(config, variant)["grpo_args"]  # the slimming is tested, not skipped
        as_dict = (lambda a: a.to_dict()) if hasattr(slim, "to_dict") else dataclasses.asdict
        assert as_dict(slim) == as_dict(full), (name, variant)


def test_dpo_and_ppo_plans_hold_no_grpo_knob_they_do_not_read():
    config = load()
    dpo, ppo = variant_plan(config, "dpo"), variant_plan(config, "ppo")
    assert not {"beta", "learning_rate", "loss_type", "temperature", "num_generations"} & set(dpo["grpo_args"])
    assert dpo["rewards"] == []  # the pairs are ranked by correctness, not by the reward list
    # PPO samples as GRPO does, from the same chat template, against the same KL reference
    assert set(ppo["grpo_args"]) == {"temperature", "max_completion_length", "reference", "chat_template_kwargs"}
    assert variant_plan(config, "grpo")["grpo_args"] == config["grpo"]


# --------------------------------------------------------------------------- studies built from other settings
def test_a_study_built_from_other_settings_is_marked():
    config = load()
    current = settings_fingerprint(config)
    assert settings_fingerprint({**config, "results_dir": "results/chains/seed1"}) == current
    assert settings_fingerprint(deep_merge(config, {"grpo": {"beta": 0.08}})) != current
    studies = {"seeds": {"settings_fingerprint": current}, "chains": {"settings_fingerprint": "0" * 16},
               "passk": {}}
    results = add_studies({}, studies, current)
    assert results["seed_study"] is studies["seeds"] and results["chain_study"] is studies["chains"]
    assert results["studies_from_other_settings"] == ["chains", "passk"]


# --------------------------------------------------------------------------- the knob table, as dry-runs
# A finished smoke run, and one with the seed and chain studies built beside it: placeholders marked up to date, whose
# Snakemake metadata holds every job's params as after a real run.
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    return placeholder_run(copy_workflow(tmp_path_factory.mktemp("knobs")), "all", *SMOKE)


@pytest.fixture(scope="module")
def finished_studies(tmp_path_factory):
    return placeholder_run(copy_workflow(tmp_path_factory.mktemp("knobs-studies")), "all", "seeds", "chains", *SMOKE)


# The smoke config's trained models of eval.models: the GRPO family (grpo, dr_grpo, rloo), dpo and ppo.
AFTER_GRPO = {"train": 3, "sample": 3, "score": 3, "token_logprobs": 1, "headline": 1, "results": 1, "figures": 1,
              "report": 1, "all": 1}
KNOBS = {
    'grpo={"beta":0.08}': (AFTER_GRPO, ["grpo", "dr_grpo", "rloo"]),
    'grpo={"learning_rate":0.002}': (AFTER_GRPO, ["grpo", "dr_grpo", "rloo"]),
    'variants={"dpo":{"dpo":{"beta":0.2}}}': (
        {"train": 1, "sample": 1, "score": 1, "results": 1, "figures": 1, "report": 1, "all": 1}, ["dpo"]),
    'reward_model={"args":{"learning_rate":0.002}}': (
        {"reward_model": 1, "reward_model_accuracy": 1, "train": 1, "sample": 1, "score": 1, "results": 1,
         "figures": 1, "report": 1, "all": 1}, ["ppo"]),
    # reward_model_accuracy reads SFT's held-out samples
    'eval={"num_samples":8}': (
        {"sample": 7, "score": 7, "reward_model_accuracy": 1, "token_logprobs": 1, "headline": 1, "results": 1,
         "figures": 1, "report": 1, "all": 1}, []),
}
TRAINED = ["grpo", "dr_grpo", "rloo", "dpo", "ppo"]


@pytest.mark.slow
@pytest.mark.parametrize("knob", list(KNOBS))
def test_a_knob_reruns_only_its_consumers(finished_run, knob):
    assert scheduled_jobs(run_snakemake(finished_run, "-n", *SMOKE)) == {}
    expected, retrained = KNOBS[knob]
    dry = run_snakemake(finished_run, "-n", *SMOKE, "--config", knob)
    assert scheduled_jobs(dry) == expected
    out = dry.stdout + dry.stderr
    for run in TRAINED:
        assert (f"results/runs/{run}/train.json" in out) == (run in retrained), (knob, run)


@pytest.mark.slow
def test_a_knob_after_a_study_reruns_the_default_run_only(finished_studies):
    knob = ["--config", 'grpo={"beta":0.08}']
    assert scheduled_jobs(run_snakemake(finished_studies, "-n", *SMOKE, *knob)) == AFTER_GRPO
    seeds = scheduled_jobs(run_snakemake(finished_studies, "seeds", "-n", *SMOKE, *knob))  # its own target reruns it
    assert seeds["seed_results"] == 1 and seeds["train"] > AFTER_GRPO["train"]


@pytest.mark.slow
def test_snakemake_n_refuses_a_misspelt_key_without_importing_trl(finished_run, tmp_path):
    blocked = tmp_path / "blocked"
    (blocked / "trl").mkdir(parents=True)
    (blocked / "trl" / "__init__.py").write_text("raise ImportError('TRL imported by a dry-run')\n")
    env = {"PYTHONPATH": f"{blocked}:{REPO}"}  # a fresh interpreter: TRL cannot be imported there
    assert scheduled_jobs(run_snakemake(finished_run, "-n", *SMOKE, env=env, in_process=False)) == {}
    refused = run_snakemake(finished_run, "-n", *SMOKE, "--config", 'variants={"dpo":{"dpo":{"betta":0.2}}}', env=env,
                            in_process=False)
    assert refused.returncode != 0
    errors = [line for line in refused.stderr.splitlines() if "error" in line.lower()]
    assert errors == ["config error: variants.dpo.dpo.betta is not a field of TRL DPOConfig: did you mean beta?"]


def test_the_report_names_a_study_built_from_other_settings():
    from thai_grpo.report.html import render_report

    html = render_report({"studies_from_other_settings": ["chains"]}, {}, {}, REPO / "report")
    assert "Built from other settings than this run's: chains" in html
    assert "Built from other settings" not in render_report({}, {}, {}, REPO / "report")
