"""DPO trains on the policy's own tokens: the pairs keep the prompt ids and the sampled completion ids, and the
batches TRL's DPOTrainer computes its loss on are exactly prompt ids + sampled ids, for a completion cut at the
budget (no stop token) and a finished one (its sampled stop token), with Qwen3's real chat template and with the
offline tiny tokenizer. A max_length that would cut answers is refused."""

from __future__ import annotations

import pytest

from thai_grpo.core.config import ConfigError
from thai_grpo.methods.dpo import TOKEN_COLUMNS, sampled_token_trainer, token_rows
from thai_grpo.data.prompts import prompt_token_ids
from thai_grpo.methods.preferences import build_pairs
from thai_grpo.methods.dpo import check_max_length
from thai_grpo.workflow import check_max_length_in_config

SYSTEM = "จงคิดทีละขั้นใน <think>...</think> แล้วจบด้วยคำตอบเป็นตัวเลขบรรทัดสุดท้าย"
QUESTION = "มีแอปเปิล 3 ผล ได้มาอีก 4 ผล มีกี่ผล"
TRUNCATED = "<think>\nขั้นที่ 1: 3 + 4 = "          # cut at the budget: no </think>, no end of turn
FINISHED = "<think>\n3 + 4 = 7\n</think>\n7"        # stopped: the sampled <|im_end|> follows


@pytest.fixture(scope="module")
def qwen3_tokenizer():
    from thai_grpo_tools.rehearsal import standin_tokenizer

    return standin_tokenizer([SYSTEM, QUESTION, TRUNCATED, FINISHED] * 4, vocab_size=400)


def sampled_records(tokenizer, budget: int = 256) -> list[dict]:
    """One problem's record as ``sample_training_problems`` writes it: a wrong completion cut at the budget, a correct
    one that stopped (its ids end with the sampled stop token)."""
    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    wrong = {"text": TRUNCATED, "correct": 0.0, "total": 0.2, "token_ids": ids(TRUNCATED), "truncated": True}
    right = {"text": FINISHED, "correct": 1.0, "total": 1.5, "token_ids": ids(FINISHED) + [tokenizer.eos_token_id],
             "truncated": False}
    prompt = prompt_token_ids(tokenizer, [QUESTION], SYSTEM)[0]
    return [{"id": "p1", "question": QUESTION, "gold": 7, "prompt_ids": prompt, "completion_budget": budget,
             "completions": [wrong, right]}]


def tiny_policy(tokenizer):
    """A fresh LoRA on a Qwen3 as wide as the tokenizer's vocabulary (8 hidden units: cheap at 151,669 rows)."""
    from peft import LoraConfig, get_peft_model

    from thai_grpo.models.tiny_base import build_tiny_qwen3

    base = build_tiny_qwen3(tokenizer, hidden_size=8, num_layers=1, num_heads=2, num_kv_heads=1,
                            intermediate_size=16, max_positions=512, seed=0)
    return get_peft_model(base, LoraConfig(task_type="CAUSAL_LM", r=2, lora_alpha=4, target_modules=["q_proj"]))


def loss_batches(tokenizer, pairs, tmp_path) -> list[dict]:
    """One DPO step as ``train_dpo`` builds the trainer; the batches its loss was computed on."""
    from datasets import Dataset
    from trl import DPOConfig

    seen = []

    class Recording(sampled_token_trainer()):
        def _compute_loss(self, model, inputs, return_outputs):
            seen.append({key: value.detach().clone() for key, value in inputs.items()})
            return super()._compute_loss(model, inputs, return_outputs)

    config = DPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", max_steps=1, logging_steps=1,
                       per_device_train_batch_size=len(pairs), save_strategy="no", seed=0)
    trainer = Recording(model=tiny_policy(tokenizer), ref_model=None, args=config,
                        train_dataset=Dataset.from_list(token_rows(pairs)), processing_class=tokenizer)
    trainer.train()
    return seen


def fed_sequences(batch: dict) -> list[tuple[list[int], list[int]]]:
    """(the real tokens of each row, the completion's tokens among them) of a collated DPO batch."""
    rows = []
    for ids, attention, completion in zip(batch["input_ids"], batch["attention_mask"], batch["completion_mask"]):
        real = ids[attention.bool()].tolist()
        rows.append((real, ids[completion.bool()].tolist()))
    return rows


def test_the_pairs_keep_the_prompt_as_generate_feeds_it_and_the_sampled_ids(qwen3_tokenizer):
    from thai_grpo.models.sampling import encode_prompts

    records = sampled_records(qwen3_tokenizer)
    (pair,), _ = build_pairs(records, SYSTEM)
    encoded = encode_prompts(qwen3_tokenizer, [QUESTION], SYSTEM, {})
    assert pair["prompt_ids"] == encoded["input_ids"][0][encoded["attention_mask"][0].bool()].tolist()
    assert pair["chosen_ids"] == records[0]["completions"][1]["token_ids"]
    assert pair["rejected_ids"] == records[0]["completions"][0]["token_ids"]
    assert pair["chosen_ids"][-1] == qwen3_tokenizer.eos_token_id != pair["rejected_ids"][-1]
    assert pair["completion_budget"] == 256
    assert pair["chosen"] == [{"role": "assistant", "content": FINISHED}]  # the text stays, for reading


def test_qwen3s_template_would_rerender_a_cut_completion_with_tokens_never_sampled(qwen3_tokenizer):
    """Why the override exists: TRL's text path renders the cut completion with an empty think block in front and an
    end of turn after it."""
    rendered = qwen3_tokenizer.apply_chat_template(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION},
         {"role": "assistant", "content": TRUNCATED}], tokenize=False)
    assert "<think>\n\n</think>\n\n<think>" in rendered and rendered.rstrip().endswith("<|im_end|>")


@pytest.mark.parametrize("which", ["qwen3", "tiny"])
def test_dpo_computes_its_loss_on_prompt_ids_plus_sampled_ids(which, qwen3_tokenizer, tiny_tokenizer, tmp_path):
    tokenizer = qwen3_tokenizer if which == "qwen3" else tiny_tokenizer
    (pair,), _ = build_pairs(sampled_records(tokenizer), SYSTEM)
    (batch,) = loss_batches(tokenizer, [pair], tmp_path)
    chosen, rejected = fed_sequences(batch)
    assert chosen == (pair["prompt_ids"] + pair["chosen_ids"], pair["chosen_ids"])  # the sampled stop token kept
    assert rejected == (pair["prompt_ids"] + pair["rejected_ids"], pair["rejected_ids"])  # none appended
    assert tokenizer.eos_token_id not in rejected[0][len(pair["prompt_ids"]):]


def test_dpo_rows_are_the_pairs_token_ids():
    assert set(token_rows([{"prompt_ids": [1], "chosen_ids": [2], "rejected_ids": [3], "completion_budget": 4,
                            "id": "y"}])[0]) == set(TOKEN_COLUMNS)


def test_a_max_length_that_would_cut_answers_is_refused():
    check_max_length(1024, 300, 256, "dpo.")
    check_max_length(None, 300, 256, "dpo.")
    with pytest.raises(ConfigError, match=r"dpo\.max_length=512 is shorter than the longest prompt \(300 tokens\) "
                                          r"plus the completion budget \(256\).*at least 556"):
        check_max_length(512, 300, 256, "dpo.")


def test_the_config_refuses_a_dpo_max_length_with_no_room_for_a_prompt():
    config = {"grpo": {"max_completion_length": 256},
              "variants": {"dpo": {"method": "dpo", "dpo": {"max_length": 256}}, "grpo": {}}}
    with pytest.raises(ConfigError, match=r"variants\.dpo\.dpo\.max_length=256 leaves no room for a prompt"):
        check_max_length_in_config(config)
    config["variants"]["dpo"]["dpo"] = {}  # TRL's 1024
    check_max_length_in_config(config)


def test_train_dpo_refuses_a_short_max_length_before_loading_a_model(tmp_path, qwen3_tokenizer):
    from run_specs import plan, run_spec

    from thai_grpo.methods.dpo import train

    pairs, _ = build_pairs(sampled_records(qwen3_tokenizer, budget=256), SYSTEM)
    spec = run_spec(tmp_path, "out", tmp_path / "no-base", tmp_path / "no-adapter", plan("dpo", dpo={"max_length": 257}),
                    pairs=pairs)
    with pytest.raises(ConfigError, match="plus the completion budget"):
        train(spec)
    assert not spec.checkpoint_dir.exists()


def test_the_real_configs_dpo_max_length_holds_the_chapters_prompt_and_budget():
    from pathlib import Path

    from thai_grpo.workflow import load_config_files
    from trainer_arguments import stage_arguments

    repo = Path(__file__).resolve().parents[1]
    config = load_config_files([str(repo / "config/config.yaml"), str(repo / "config/qwen3-0.6b.yaml")],
                               str(repo / "config/schema.yaml"))
    check_max_length_in_config(config)
    arguments = stage_arguments(config, "dpo")
    check_max_length(arguments.max_length, 256, config["grpo"]["max_completion_length"], "dpo.")  # max_prompt_length
    assert arguments.max_length >= 1024


def test_sampled_records_carry_the_prompt_ids_and_the_budget(tiny_model_dir, synthetic_rows):
    """sample_training_problems (the preference_pairs stage) on a tiny policy: each record's prompt_ids are what the
    sampler fed the model, each completion keeps its sampled ids, within the budget."""
    from thai_grpo.data.problems import normalize_rows
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.methods.preferences import sample_training_problems
    from thai_grpo.models.loading import load_policy, load_tokenizer
    from thai_grpo.models.sampling import encode_prompts

    rows, _ = normalize_rows(synthetic_rows[:3], "translated_question", "translated_answer")
    tokenizer = load_tokenizer(tiny_model_dir)
    records = sample_training_problems(load_policy(tiny_model_dir, None).eval(), tokenizer, rows, SYSTEM_PROMPT, 2,
                                       6, 1.0, 2, seed=0)
    for record, row in zip(records, rows):
        encoded = encode_prompts(tokenizer, [row["question"]], SYSTEM_PROMPT, {})
        assert record["prompt_ids"] == encoded["input_ids"][0].tolist() and record["completion_budget"] == 6
        assert all(1 <= len(c["token_ids"]) <= 6 for c in record["completions"])
