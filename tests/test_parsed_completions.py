"""Rewards see what TRL 1.16 hands them: with a response template on the tokenizer (TRL's Qwen3 one here),
GRPOTrainer decodes each conversational completion with ``parse_response``, which moves the think block, tags
stripped, into ``reasoning_content``. The rewards must still see ``<think>reasoning</think>answer``."""

from __future__ import annotations

import pytest

from thai_grpo.core.rewards import completion_text, reward_functions
from thai_grpo.methods.recorder import recorder as make_recorder

SYSTEM = "จงคิดทีละขั้นใน <think>...</think> แล้วจบด้วยคำตอบเป็นตัวเลขบรรทัดสุดท้าย"
QUESTION = "แม่มีไข่ 12 ฟอง ใช้ทำขนมไป 5 ฟอง แม่เหลือไข่กี่ฟอง"
REASONED = "<think>\nแม่มีไข่ 12 ฟอง ใช้ไป 5 ฟอง เหลือ 12 - 5 = 7 ฟอง\n</think>\n\n7<|im_end|>"
EMPTY_THINK = "<think>\n\n</think>\n\n7<|im_end|>"
NAMES = ["correct", "format", "format_lenient", "thai"]


@pytest.fixture(scope="module")
def qwen3_tokenizer(tiny_tokenizer):
    """The tiny tokenizer with Qwen3's own chat template and TRL's Qwen3 response template (TRL's
    ``add_response_schema``), as a hub Qwen3 tokenizer that ships one would be."""
    import copy
    from pathlib import Path

    import trl
    from trl.chat_template_utils import add_response_schema

    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text(encoding="utf-8")
    return add_response_schema(tokenizer)


def as_trl_hands_it(tokenizer, completion: str):
    """(the completion as GRPOTrainer passes it to reward functions, its completion ids), by TRL's own code."""
    from trl.chat_template_utils import parse_response

    prompt = tokenizer.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
                                           tokenize=False, add_generation_prompt=True, enable_thinking=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    return [parse_response(tokenizer, ids, prefix=prompt_ids)], ids


def grade(completions, completion_ids=None, tokenizer=None) -> dict[str, list[float]]:
    """Every reward through the recorder's ``wrap``, called as GRPOTrainer calls reward functions."""
    recorder = make_recorder("unused", "test", 1.0, group_size=len(completions), tokenizer=tokenizer)
    prompts = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]] * len(completions)
    for name, function in zip(NAMES, reward_functions(NAMES)):
        recorder.wrap(name, function)(prompts=prompts, completions=completions, completion_ids=completion_ids,
                                      answer=[7] * len(completions), trainer_state=None)
    return recorder.batch


def test_trl_splits_the_think_block_off(qwen3_tokenizer):
    (message,), _ = as_trl_hands_it(qwen3_tokenizer, REASONED)
    assert message["content"] == "7" and "<think>" not in message["content"]
    assert message["reasoning_content"] == "แม่มีไข่ 12 ฟอง ใช้ไป 5 ฟอง เหลือ 12 - 5 = 7 ฟอง"


def test_completion_text_rebuilds_the_think_block(qwen3_tokenizer):
    completion, _ = as_trl_hands_it(qwen3_tokenizer, REASONED)
    assert completion_text(completion) == "<think>แม่มีไข่ 12 ฟอง ใช้ไป 5 ฟอง เหลือ 12 - 5 = 7 ฟอง</think>7"
    assert completion_text({"role": "assistant", "thinking": "คิด", "content": "7"}) == "<think>คิด</think>7"
    assert completion_text([{"role": "assistant", "reasoning_content": None, "content": "7"}]) == "7"


@pytest.mark.parametrize("with_tokenizer", [False, True], ids=["rebuilt from the message", "decoded ids"])
def test_parsed_completion_earns_format_and_thai_through_the_recorder(qwen3_tokenizer, with_tokenizer):
    completion, ids = as_trl_hands_it(qwen3_tokenizer, REASONED)
    batch = grade([completion], [ids], qwen3_tokenizer if with_tokenizer else None)
    assert batch["rewards"] == {"correct": [1.0], "format": [0.3], "format_lenient": [0.3], "thai": [0.2]}
    assert batch["completions"][0].startswith("<think>") and batch["completions"][0].endswith("7")


def test_the_content_alone_would_have_paid_no_format_and_no_thai(qwen3_tokenizer):
    """What the rewards saw before: only ``content``. The test that the rebuild is needed."""
    (message,), _ = as_trl_hands_it(qwen3_tokenizer, REASONED)
    batch = grade([[{"role": "assistant", "content": message["content"]}]])
    assert batch["rewards"]["format"] == [0.0] and batch["rewards"]["thai"] == [0.0]


def test_an_empty_think_block_stays_visible_with_the_tokenizer(qwen3_tokenizer):
    """The parser drops an empty think block altogether; the recorder grades the generated text, so the lenient
    format's reward hack (an empty block for +0.3) is still paid, and seen, as it is in held-out sampling."""
    completion, ids = as_trl_hands_it(qwen3_tokenizer, EMPTY_THINK)
    assert completion == [{"role": "assistant", "content": "7"}]  # no trace of the block left
    decoded = grade([completion], [ids], qwen3_tokenizer)
    assert decoded["completions"] == ["<think>\n\n</think>\n\n7"]
    assert decoded["rewards"]["format_lenient"] == [0.3]
    assert grade([completion], [ids])["rewards"]["format_lenient"] == [0.0]  # what the message alone allows
