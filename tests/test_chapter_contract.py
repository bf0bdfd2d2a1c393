"""The chapter's experiment as a contract (thai_grpo.analyses.chapter): the real config, merged as Snakemake merges it,
gives every stage's trainer the chapter's numbers; a leak from the offline default, another reference, another k3
or other problems are caught; the offline default's departures are exactly the ones it explains."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from thai_grpo.analyses.chapter import CHAPTER, FACTS, OFFLINE_REASONS, TRAIN_SIZE, departures
from thai_grpo.workflow import load_config_files, variant_settings
from trainer_arguments import optimizer_steps, resolved_values, rollout_steps, stage_arguments

REPO = Path(__file__).resolve().parents[1]
OFFLINE = [str(REPO / "config/config.yaml")]
REAL = OFFLINE + [str(REPO / "config/qwen3-0.6b.yaml")]
SCHEMA = str(REPO / "config/schema.yaml")


def real_config(tmp_path=None, edit=None) -> dict:
    """The real config as Snakemake resolves it; ``edit(yaml_dict)`` changes config/qwen3-0.6b.yaml first."""
    if edit is None:
        return load_config_files(REAL, SCHEMA)
    overlay = yaml.safe_load((REPO / "config/qwen3-0.6b.yaml").read_text(encoding="utf-8"))
    edit(overlay)
    path = tmp_path / "qwen3-edited.yaml"
    path.write_text(yaml.safe_dump(overlay, allow_unicode=True), encoding="utf-8")
    return load_config_files(OFFLINE + [str(path)], SCHEMA)


@pytest.fixture(scope="module")
def real_values():
    return resolved_values(real_config())


def test_the_real_config_is_the_chapters_experiment(real_values):
    assert departures(real_values) == []
    # every fact is checked: each stage of the contract is a stage of the real config
    assert set(real_values) == {fact.key for fact in CHAPTER}


def test_the_chapters_sizes_give_16_optimizer_steps_in_both_modes(real_values):
    for stage in ("grpo", "grpo_fast", "dr_grpo", "rloo"):
        assert real_values[f"{stage}.optimizer_steps"] == 16, stage
    assert (real_values["grpo.num_generations"], real_values["grpo_fast.num_generations"]) == (8, 4)


@pytest.mark.parametrize("stage", ["grpo", "grpo_fast", "dr_grpo", "rloo"])
def test_optimizer_steps_are_the_trainers_own_count_over_128_rows(stage, tiny_model_dir, tiny_adapter_dir):
    """The trainer built as the train rule builds it, its dataloader over 128 prompts, and transformers' own
    count of optimizer steps (Trainer.set_initial_training_values)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer, RLOOTrainer

    from thai_grpo.models.loading import load_policy, load_tokenizer

    arguments = stage_arguments(real_config(), stage)
    trainer_class = GRPOTrainer if isinstance(arguments, GRPOConfig) else RLOOTrainer
    rows = Dataset.from_list([{"prompt": f"โจทย์ข้อ {i}"} for i in range(TRAIN_SIZE)])
    trainer = trainer_class(model=load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True),
                            reward_funcs=[lambda completions, **kw: [0.0] * len(completions)], args=arguments,
                            processing_class=load_tokenizer(tiny_model_dir), train_dataset=rows)
    counted = trainer.set_initial_training_values(trainer.args, trainer.get_train_dataloader())[-1]
    assert counted == rollout_steps(arguments, TRAIN_SIZE) == 16


def test_optimizer_steps_formula():
    assert optimizer_steps(128, 8, 16, 4, 1, -1) == 16
    assert optimizer_steps(128, 4, 16, 2, 1, -1) == 16
    assert optimizer_steps(128, 8, 16, 4, 2, -1) == 32
    assert optimizer_steps(128, 8, 64, 1, 1, 40) == 40  # max_steps > 0 wins over the epoch
    assert optimizer_steps(100, 8, 16, 4, 1, -1) == 13  # a last, partial step


def drop_grpo(field):
    return lambda overlay: overlay["grpo"].pop(field)


def set_grpo(field, value):
    return lambda overlay: overlay["grpo"].update({field: value})


@pytest.mark.parametrize("edit, caught", [
    (drop_grpo("max_steps"), {"grpo.max_steps", "grpo.optimizer_steps", "grpo_fast.max_steps", "dr_grpo.max_steps",
                              "rloo.max_steps"}),  # the offline default's 40 leaks into every GRPO-family stage
    (set_grpo("reference", "sft"), {"grpo.reference", "grpo_fast.reference"}),
    (set_grpo("use_bias_correction_kl", True), {"grpo.use_bias_correction_kl", "grpo_fast.use_bias_correction_kl"}),
    (set_grpo("disable_dropout", False), {"grpo.disable_dropout", "grpo_fast.disable_dropout"}),
    (lambda overlay: overlay["reward_model"]["args"].pop("lr_scheduler_type"), {"reward_model.lr_scheduler_type"}),
    (lambda overlay: overlay["variants"]["dpo"]["dpo"].pop("max_steps"), {"dpo.max_steps"}),
    (lambda overlay: overlay["variants"]["dpo"]["dpo"].pop("max_length"), {"dpo.max_length"}),  # the offline 512
    (lambda overlay: overlay["data"].pop("selection"), {"config.data.selection"}),
])
def test_a_leak_or_a_changed_choice_is_a_departure(tmp_path, edit, caught):
    found = {d["key"] for d in departures(resolved_values(real_config(tmp_path, edit)))}
    assert caught <= found


def test_every_offline_departure_is_explained_and_no_reason_is_stale():
    found = {d["key"] for d in departures(resolved_values(load_config_files(OFFLINE, SCHEMA)))}
    assert found == set(OFFLINE_REASONS)
    assert set(OFFLINE_REASONS) <= set(FACTS)


def test_the_128_problems_are_datasets_own_shuffle_and_select(tmp_path, synthetic_rows):
    """On a local parquet with the real column names: the GRPO set is Dataset.shuffle(seed=42).select(range(128)),
    in order; the held-out set comes from the other rows and shares no text with it."""
    import datasets

    from thai_grpo.core.io import read_jsonl, write_jsonl
    from thai_grpo.data.problems import chapter_split, split_rows, normalize_rows, text_hash

    records = [{"translated_question": r["translated_question"], "translated_answer": r["translated_answer"]}
               for r in synthetic_rows]
    records += copy.deepcopy(records[:5])  # duplicates in the source, as real data can have
    parquet = tmp_path / "gsm8k-thai.parquet"
    datasets.Dataset.from_list(records).to_parquet(str(parquet))
    source = datasets.load_dataset("parquet", data_files=str(parquet), split="train")
    write_jsonl(tmp_path / "source.jsonl", source.to_list())  # what the dataset rule writes
    chapter = source.shuffle(seed=42).select(range(128))

    splits = chapter_split(read_jsonl(tmp_path / "source.jsonl"), 42, 128, 50, 0, "translated_question",
                           "translated_answer")
    assert [row["question"] for row in splits["train"]] == chapter["translated_question"]
    train_texts = {text_hash(q) for q in chapter["translated_question"]}
    assert not train_texts & {text_hash(row["question"]) for row in splits["heldout"]}
    assert len(splits["heldout"]) == 50 and len({row["id"] for row in splits["heldout"]}) == 50
    # the offline default's order (held-out first, Python's shuffle) is another selection: the contract tells them apart
    rows, _ = normalize_rows(records, "translated_question", "translated_answer")
    other = split_rows(rows, 42, 128, 50, 0)["train"]
    assert [row["question"] for row in other] != chapter["translated_question"]


def test_a_training_row_without_a_gold_answer_is_refused(synthetic_rows):
    from thai_grpo.data.problems import chapter_split

    records = [{"q": r["translated_question"], "a": "no number here"} for r in synthetic_rows]
    with pytest.raises(ValueError, match=r"of the 128 training rows .* have no integer gold answer"):
        chapter_split(records, 42, 128, 10, 0, "q", "a")


def test_the_reference_knob_reaches_trl(tiny_model_dir, tiny_adapter_dir, tmp_path):
    """reference: base deletes TRL's 'ref' copy of the adapter, so TRL scores the reference with the adapter
    disabled; reference: sft keeps the copy."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from thai_grpo.core.references import KL_REFERENCES
    from thai_grpo.methods.grpo import use_reference
    from thai_grpo.models.loading import load_policy, load_tokenizer

    kept = {}
    for reference in ("sft", "base"):
        trainer = GRPOTrainer(model=load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True),
                              reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                              args=GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", beta=0.04,
                                              per_device_train_batch_size=2, num_generations=2),
                              processing_class=load_tokenizer(tiny_model_dir),
                              train_dataset=Dataset.from_list([{"prompt": "2 บวก 2"}] * 4))
        assert use_reference(trainer, reference) == KL_REFERENCES[reference]["trl"]
        kept[reference] = "ref" in trainer.model.peft_config
    assert kept == {"sft": True, "base": False}


def test_the_contract_is_serialisable_for_the_run_card():
    json.dumps([{"key": f.key, "value": f.value, "source": f.source} for f in CHAPTER], ensure_ascii=False)


def test_the_run_card_reads_the_same_values_from_what_the_trainers_recorded():
    """collect_results reads the contract's values from the train records (no TRL import); they are the values the
    trainers were built with."""
    import dataclasses

    from thai_grpo.workflow import variant_plan
    from thai_grpo.analyses.chapter import recorded_values, stage_records

    config = real_config()
    trains = {}
    for stage in config["variants"]:
        arguments = stage_arguments(config, stage)
        if dataclasses.is_dataclass(arguments) and not hasattr(arguments, "to_dict"):  # PPOSettings
            trains[stage] = {"method": "ppo", "args": dataclasses.asdict(arguments)}
        else:
            trains[stage] = {"resolved_args": arguments.to_dict(),
                             "reference": variant_settings(config, stage)["grpo"]["reference"],
                             "optimizer_steps": rollout_steps(arguments, TRAIN_SIZE)
                             if hasattr(arguments, "num_generations") else None}
    reward_model = {"resolved_args": stage_arguments(config, "reward_model").to_dict()}
    recorded = recorded_values(config, stage_records(trains, reward_model))
    resolved = resolved_values(config)
    assert recorded == resolved


@pytest.mark.parametrize("section", ["grpo", "eval"])
def test_vllm_is_refused_where_it_would_not_run_the_chapters_experiment(tmp_path, section):
    """The real config with TRL's colocated vLLM rollouts, or with vLLM sampling the held-out sets, is not
    the chapter's experiment: the config check refuses both before any job (config/schema.yaml)."""
    from thai_grpo.core.config import ConfigError

    def turn_on(overlay):
        overlay[section]["use_vllm"] = True

    refused = {"grpo": r"grpo\.use_vllm=True: refused", "eval": r"eval\.use_vllm=True: .*decode loop"}
    with pytest.raises(ConfigError, match=refused[section]):
        real_config(tmp_path, turn_on)
