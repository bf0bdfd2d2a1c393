import unicodedata

import pytest

from thai_grpo.jobs.devices import choose_dtype
from thai_grpo.core.io import require_model_dir
from thai_grpo.models.loading import count_parameters, load_base_model, load_policy, load_tokenizer
from thai_grpo.report.results import safetensors_parameter_count


def test_think_tags_are_ordinary_tokens_that_survive_decoding(tiny_tokenizer):
    ids = tiny_tokenizer("<think>คิด</think> 12")["input_ids"]
    decoded = tiny_tokenizer.decode(ids, skip_special_tokens=True)
    assert "<think>" in decoded and "</think>" in decoded
    assert tiny_tokenizer.convert_tokens_to_ids("<think>") in ids


def test_digits_are_split_one_token_each(tiny_tokenizer):
    tokens = tiny_tokenizer.tokenize("1234")
    assert len(tokens) == 4


@pytest.fixture(scope="module")
def thai_words_tokenizer(synthetic_rows):
    from thai_grpo.data.problems import sft_target
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.models.tiny_base import train_tokenizer

    texts = [f"{SYSTEM_PROMPT}\n{r['translated_question']}\n{sft_target(r['translated_answer'], r['answer'])}"
             for r in synthetic_rows]
    return texts, train_tokenizer(texts, vocab_size=500, words="thai"), train_tokenizer(texts, vocab_size=500)


def test_thai_words_keep_their_marks_and_text_round_trips(thai_words_tokenizer, synthetic_rows):
    _, thai, _ = thai_words_tokenizer
    question = synthetic_rows[0]["translated_question"]
    assert thai.decode(thai(question)["input_ids"]) == question
    for token in thai.convert_ids_to_tokens(thai("สมชายอายุ 8 ปี")["input_ids"]):
        text = thai.convert_tokens_to_string([token])
        assert not unicodedata.category(text[0]).startswith("M"), f"a token starts with a bare mark: {text!r}"


def test_thai_words_cost_fewer_tokens_than_gpt2_word_cuts(thai_words_tokenizer):
    """GPT-2's pre-tokenizer cuts Thai words at every vowel and tone mark; ``words="thai"`` lets BPE merge them."""
    texts, thai, gpt2 = thai_words_tokenizer
    ours = sum(len(thai(t)["input_ids"]) for t in texts[:50])
    theirs = sum(len(gpt2(t)["input_ids"]) for t in texts[:50])
    assert ours < 0.85 * theirs  # at vocab 1024 on the default corpus: 2.5x fewer (README)
    with pytest.raises(ValueError, match="use 'thai' or 'gpt2'"):
        from thai_grpo.models.tiny_base import train_tokenizer

        train_tokenizer(texts[:5], vocab_size=300, words="spaces")


def test_chat_template_returns_prefix_plus_generation_prompt(tiny_tokenizer):
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    text = tiny_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n<|im_start|>assistant\n"


def test_saved_base_and_adapter_load_back(tiny_model_dir, tiny_adapter_dir):
    assert load_tokenizer(tiny_model_dir).chat_template
    base = load_base_model(tiny_model_dir)
    assert safetensors_parameter_count(tiny_model_dir) == count_parameters(base)["total"]
    policy = load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True)
    counts = count_parameters(policy)
    assert 0 < counts["trainable"] < counts["total"]


def test_missing_or_corrupt_model_folders_name_the_path(tmp_path, tiny_model_dir):
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        require_model_dir(tmp_path, "adapter")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "config.json").write_text((tiny_model_dir / "config.json").read_text())
    (corrupt / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(RuntimeError, match="could not be loaded"):
        load_base_model(corrupt)


def test_pickled_weights_are_refused(tmp_path, tiny_model_dir):
    only_bin = tmp_path / "bin"
    only_bin.mkdir()
    (only_bin / "config.json").write_text((tiny_model_dir / "config.json").read_text())
    (only_bin / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(FileNotFoundError, match="safetensors"):
        require_model_dir(only_bin, "base model")


@pytest.mark.parametrize("capability, dtype", [
    (None, "float32"), ((7, 5), "float16"), ((7, 0), "float16"), ((8, 0), "bfloat16"), ((9, 0), "bfloat16"),
])
def test_dtype_follows_compute_capability(capability, dtype):
    assert choose_dtype(capability) == dtype


def test_pretraining_texts_end_with_eos_and_are_cut_at_max_length(tiny_tokenizer, synthetic_rows):
    from thai_grpo.models.sft import language_modelling_dataset

    texts = [row["translated_question"] for row in synthetic_rows[:4]]
    whole = language_modelling_dataset(texts, tiny_tokenizer, max_length=None)
    for text, ids in zip(texts, whole["input_ids"]):
        assert ids[-1] == tiny_tokenizer.eos_token_id
        assert ids[:-1] == tiny_tokenizer(text)["input_ids"]
    cut = language_modelling_dataset(texts, tiny_tokenizer, max_length=8)
    assert all(len(ids) == 8 for ids in cut["input_ids"])
    assert cut["input_ids"][0] == whole["input_ids"][0][:8]
