"""The offline default's own tokenizer (byte-level BPE with Qwen's chat tokens) and a tiny Qwen3 of the published
architecture, sized for a 2-core CPU; the real run downloads both instead."""

from __future__ import annotations

PAD_TOKEN, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
# Ordinary added tokens, not special ones: TRL decodes completions with skip_special_tokens=True,
# and a special <think> would vanish from the text the format reward reads.
THINK_TOKENS = ["<think>", "</think>"]

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)


# Pre-tokenizer pieces of ``words="thai"``: letters WITH their combining marks (Thai vowels and tone marks are category
# M, which GPT-2's letters-only regex cuts at), punctuation, or whitespace; each with at most one leading space.
WORD_PIECES = r" ?[\p{L}\p{M}]+| ?[^\s\p{L}\p{M}\p{N}]+|\s+"


def train_tokenizer(texts: list[str], vocab_size: int, words: str = "gpt2"):
    """A byte-level BPE tokenizer with digits split one by one (as Qwen does) and a chat template. ``words``: ``gpt2``
    cuts text at GPT-2's letter runs (a Thai word at each vowel and tone mark), ``thai`` keeps Thai words whole."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    if words not in ("thai", "gpt2"):
        raise ValueError(f"base.tokenizer.words={words!r}: use 'thai' or 'gpt2'")
    cut = [pre_tokenizers.Split(Regex(WORD_PIECES), behavior="isolated"),
           pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)] if words == "thai" else \
        [pre_tokenizers.ByteLevel(add_prefix_space=False)]
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), *cut])
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD_TOKEN, IM_START, IM_END],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=IM_END, pad_token=PAD_TOKEN,
                                        additional_special_tokens=[IM_START], model_max_length=1024)
    tokenizer.add_tokens(THINK_TOKENS, special_tokens=False)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_qwen3(tokenizer, hidden_size: int, num_layers: int, num_heads: int, num_kv_heads: int,
                     intermediate_size: int, max_positions: int, seed: int):
    """A freshly initialised Qwen3 causal LM sized for a 2-core CPU (a few million parameters)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=intermediate_size,
                         num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_kv_heads,
                         head_dim=hidden_size // num_heads, max_position_embeddings=max_positions,
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    return Qwen3ForCausalLM(config)  # its generation_config takes the EOS and pad ids from config
