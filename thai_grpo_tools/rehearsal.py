"""Qwen3-shaped stand-ins for what ``config/qwen3-0.6b.yaml`` downloads: the base (Qwen3-0.6B's config.json with
depth and width shrunk, ``STANDIN_SIZES``; a small learned BPE under Qwen3's added tokens at their real ids, its chat
template and response schema; taught in seconds to open with a think block when thinking is on and to answer bare when
it is off) and the SFT adapter (``STANDIN_ADAPTER``); ``full_size_standin``: Qwen3-0.6B's own size, random weights.
tests/real_config_standins.py puts them in a Hugging Face cache for the real config's offline rehearsal.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from thai_grpo.data.prompts import build_prompt

# With thinking on, a think block with more Thai letters than the ten Latin ones of its tags (so the Thai-script
# reward can pay); with thinking off, nothing.
THINKING_ON, THINKING_OFF = "<think>\nคิดทีละขั้นตอนแล้วตอบเป็นตัวเลข\n</think>\n\n", ""
# Qwen/Qwen3-0.6B's config.json at the pinned revision, every field as published.
QWEN3_0_6B_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28,
    "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}
# Depth and width only, Qwen3-0.6B's ratios kept (head_dim = 2 x hidden / heads, KV heads = heads / 2, intermediate =
# 3 x hidden). Hidden 32 keeps the 151,936-row embedding at 4.9M parameters.
STANDIN_SIZES = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 16, "intermediate_size": 96}
# Qwen3's added tokens from id 151643 on, in order, with their "special" flag: <think> and </think> are not special,
# so they survive skip_special_tokens=True.
QWEN3_ADDED_TOKENS = (
    [(name, True) for name in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
                               "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>",
                               "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>",
                               "<|video_pad|>")]
    + [(name, False) for name in ("<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                                  "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
                                  "</tool_response>", "<think>", "</think>")])
QWEN3_FIRST_ADDED_ID = 151643
QWEN3_GENERATION_CONFIG = {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643],
                           "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95}
STANDIN_ADAPTER = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05,
                   "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}


def standin_tokenizer(texts: list[str], vocab_size: int = 1000):
    """Qwen3's tokenizer in miniature: a byte-level BPE learned on ``texts``, filler ids up to 151,642, Qwen3's added
    tokens at their ids, its pad, eos, chat template and response schema."""
    import trl
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import add_response_schema

    cut = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False)])
    learner = Tokenizer(models.BPE())
    learner.pre_tokenizer = cut
    learner.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    learned = learner.get_vocab()
    merges = [tuple(pair.split(" ")) if isinstance(pair, str) else tuple(pair)
              for pair in json.loads(learner.to_str())["model"]["merges"]]
    vocab = {**learned, **{f"<|filler_{i}|>": i for i in range(len(learned), QWEN3_FIRST_ADDED_ID)}}
    core = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    core.pre_tokenizer, core.decoder = cut, decoders.ByteLevel()
    core.add_tokens([AddedToken(name, special=special, normalized=False) for name, special in QWEN3_ADDED_TOKENS])
    special = [name for name, flag in QWEN3_ADDED_TOKENS if flag]
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=special[1:], clean_up_tokenization_spaces=False,
                                        split_special_tokens=False)
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text(encoding="utf-8")
    return add_response_schema(tokenizer)


def standin_problems(count: int, seed: int = 3) -> list[dict]:
    """Synthetic Thai problems in VISAI-AI/gsm8k-thai's columns (``translated_question``, ``translated_answer``)."""
    from thai_grpo.data.synthetic import generate_problems

    return [{key: row[key] for key in ("translated_question", "translated_answer")}
            for row in generate_problems(count, seed=seed, max_operand=9)]


def synthetic_rows(count: int, seed: int = 3) -> list[dict]:
    """The same problems as rows as the split writes them (``id``, ``question``, integer ``answer``)."""
    from thai_grpo.data.synthetic import generate_problems

    return [{"id": f"p{i}", "question": row["translated_question"], "answer": int(row["answer"])}
            for i, row in enumerate(generate_problems(count, seed=seed, max_operand=9))]


def teaching_examples(tokenizer, questions: list[str], system_prompt: str) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, completion ids) of each question with thinking on (a think block, then a number) and off."""
    examples = []
    for index, question in enumerate(questions):
        for thinking, opening in ((True, THINKING_ON), (False, THINKING_OFF)):
            prompt = tokenizer.apply_chat_template(build_prompt(question, system_prompt), tokenize=False,
                                                   add_generation_prompt=True, enable_thinking=thinking)
            completion = f"{opening}{index % 10}{tokenizer.eos_token}"
            examples.append((tokenizer(prompt, add_special_tokens=False)["input_ids"],
                             tokenizer(completion, add_special_tokens=False)["input_ids"]))
    return examples


def teach(model, examples: list[tuple[list[int], list[int]]], pad_id: int, steps: int = 120, batch_size: int = 8,
          learning_rate: float = 3e-3, seed: int = 0) -> float:
    """A few AdamW steps of next-token loss on the completions only; returns the last batch's loss."""
    import torch
    from torch.nn.utils.rnn import pad_sequence as pad

    generator = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    model.train()
    loss = torch.tensor(0.0)
    for _ in range(steps):
        batch = [examples[generator.randrange(len(examples))] for _ in range(batch_size)]
        ids = pad([torch.tensor(p + c) for p, c in batch], batch_first=True, padding_value=pad_id)
        mask = pad([torch.ones(len(p) + len(c), dtype=torch.long) for p, c in batch], batch_first=True)
        labels = pad([torch.tensor([-100] * len(p) + c) for p, c in batch], batch_first=True, padding_value=-100)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    return loss.item()


def compact_ids(ids: list[int], learned: int) -> list[int]:
    """Real ids -> the compact model's: ordinary tokens keep theirs, the added tokens follow them."""
    return [i if i < learned else learned + i - QWEN3_FIRST_ADDED_ID for i in ids]


def visited_hidden_states(model, examples: list[tuple[list[int], list[int]]], eos_id: int, samples: int = 8,
                          seed: int = 0):
    """The compact model's final hidden states at the taught examples' positions and at ``samples`` sampled ones."""
    import torch

    torch.manual_seed(seed)
    taught, strayed = [], []
    with torch.no_grad():
        for prompt, completion in examples:
            sequences = model.generate(torch.tensor([prompt]), do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                       max_new_tokens=len(completion) + 8, num_return_sequences=samples,
                                       eos_token_id=eos_id, pad_token_id=eos_id)
            taught.append(model.model(input_ids=torch.tensor([prompt + completion])).last_hidden_state[0])
            strayed += [model.model(input_ids=sequence[None]).last_hidden_state[0] for sequence in sequences]
    return torch.cat(taught), torch.cat(strayed)


def unused_row(model, taught, strayed, margin: float = 30.0):
    """One embedding row for every unused id, against the direction the final hidden states share, its logit ``margin``
    below each covered position's best; an uncovered position (counted) can sample it, as a real model a rare token."""
    import torch

    states = torch.cat([taught, strayed])
    common = taught.mean(0).clone().requires_grad_(True)
    optimizer = torch.optim.Adam([common], lr=0.05)
    for _ in range(300):  # maximise the smallest projection over the taught positions (a soft minimum), then the rest
        loss = torch.logsumexp(-10.0 * taught @ (common / common.norm()), 0) + \
            0.1 * torch.logsumexp(-10.0 * strayed @ (common / common.norm()), 0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        direction = -common / common.norm()
        covered = states[states @ direction < 0]
        print(f"unused ids held down at {int((taught @ direction < 0).sum())} of {len(taught)} taught positions, "
              f"{len(covered)} of {len(states)} visited ones", flush=True)
        best = model.lm_head(covered).max(-1).values
        return direction * ((best + margin) / -(covered @ direction)).max()


def widen_vocabulary(compact, learned: int, config: dict, filler_row):
    """The compact model in Qwen3's 151,936-row vocabulary, ``filler_row`` at every unused id."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    model = Qwen3ForCausalLM(Qwen3Config(**{**config, "torch_dtype": "float32"}))
    model.load_state_dict({name: tensor for name, tensor in compact.state_dict().items()
                           if "embed_tokens" not in name and "lm_head" not in name}, strict=False)
    small, added = compact.get_input_embeddings().weight.detach(), len(QWEN3_ADDED_TOKENS)
    with torch.no_grad():
        rows = model.get_input_embeddings().weight
        rows.copy_(filler_row.expand_as(rows))
        rows[:learned] = small[:learned]
        rows[QWEN3_FIRST_ADDED_ID:QWEN3_FIRST_ADDED_ID + added] = small[learned:learned + added]
    model.tie_weights()
    return model


def learned_size(tokenizer) -> int:
    """How many ordinary (learned) tokens the stand-in tokenizer has: ids below it; fillers follow."""
    return sum(1 for token, i in tokenizer.get_vocab().items()
               if i < QWEN3_FIRST_ADDED_ID and not token.startswith("<|filler_"))


def save_base(model, tokenizer, target: Path, config: dict) -> None:
    """A base model folder as the hub's: weights, ``config`` as its config.json, Qwen3's generation config, tokenizer."""
    model.save_pretrained(target, safe_serialization=True)
    for name, content in (("config.json", config), ("generation_config.json", QWEN3_GENERATION_CONFIG)):
        (target / name).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    tokenizer.save_pretrained(target)


def build_standin_base(target: Path, problems: list[dict], mgsm_questions: list[str], system_prompt: str,
                       seed: int = 0) -> float:
    """The stand-in base in ``target``, taught the think-block habit in a compact vocabulary (seconds, not minutes),
    then widened to Qwen3's; returns its teaching loss."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    questions = [p["translated_question"] for p in problems]
    texts = [system_prompt] + questions + mgsm_questions + [p["translated_answer"] for p in problems] + [THINKING_ON] * 20
    tokenizer = standin_tokenizer(texts)
    learned = learned_size(tokenizer)
    config = {**QWEN3_0_6B_CONFIG, **STANDIN_SIZES}
    torch.manual_seed(seed)
    compact = Qwen3ForCausalLM(Qwen3Config(**{**config, "torch_dtype": "float32",
                                              "vocab_size": learned + len(QWEN3_ADDED_TOKENS),
                                              "bos_token_id": None, "eos_token_id": None}))
    examples = [(compact_ids(p, learned), compact_ids(c, learned))
                for p, c in teaching_examples(tokenizer, questions, system_prompt)]
    # One thread: the compact model's operators are too small to share, and a second thread waiting for a busy core
    # costs far more than it gives. Taught on the short synthetic prompts only; the habit carries over to MGSM's
    # longer ones. At hidden 32, 3e-3 left P(<think> | thinking off) at ~0.5% per sample; 6e-3 takes it below 0.05%.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        loss = teach(compact, examples, compact_ids([tokenizer.pad_token_id], learned)[0], seed=seed,
                     learning_rate=6e-3)
        eos = compact_ids([tokenizer.eos_token_id], learned)[0]
        filler = unused_row(compact, *visited_hidden_states(compact, examples[::4], eos, seed=seed))
    finally:
        torch.set_num_threads(threads)
    # float32: bfloat16 rounding would undo the tiny model's habit
    save_base(widen_vocabulary(compact, learned, config, filler), tokenizer, target, config)
    return loss


def build_standin_adapter(base_dir: Path, target: Path) -> None:
    """A LoRA adapter on the stand-in base (``STANDIN_ADAPTER``: dropout on), saved as PEFT saves the hub's."""
    from peft import LoraConfig, get_peft_model

    from thai_grpo.models.loading import load_base_model

    config = LoraConfig(task_type="CAUSAL_LM", **STANDIN_ADAPTER)
    get_peft_model(load_base_model(base_dir), config).save_pretrained(target, safe_serialization=True)


def standin_models(folder: Path, system_prompt: str) -> tuple[Path, Path]:
    """(base, adapter): the taught stand-ins, built in ``folder`` the first time (a minute or two), reused after."""
    base, adapter = folder / "base", folder / "adapter"
    if not (base / "config.json").exists():
        build_standin_base(base, standin_problems(24), [], system_prompt)
    if not (adapter / "adapter_config.json").exists():
        build_standin_adapter(base, adapter)
    return base, adapter


def full_size_standin(folder: Path, rows: list[dict], system_prompt: str, seed: int = 0) -> dict:
    """``folder/base`` (Qwen3-0.6B's config, random bfloat16 weights: completions run to the budget) and
    ``folder/sft_adapter``, built the first time; their paths."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    base, adapter = folder / "base", folder / "sft_adapter"
    if not (base / "config.json").is_file():
        tokenizer = standin_tokenizer([system_prompt] + [r["question"] for r in rows] + ["<think>คิด</think> 42"])
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(Qwen3Config(**{**QWEN3_0_6B_CONFIG, "torch_dtype": "float32"}))
        save_base(model.to(torch.bfloat16), tokenizer, base, QWEN3_0_6B_CONFIG)
        del model
    if not (adapter / "adapter_config.json").is_file():
        build_standin_adapter(base, adapter)
    return {"base": str(base), "adapter": str(adapter),
            "weights": "random weights (the hub cache holds no real base and adapter): completions run to the budget"}
