"""The decode loop (thai_grpo.models.decoding) gives the samples today's path gives: ``generate`` over the rows with
each prompt prefilled once (``shared_prefix.generate_sharing_prompts``), greedy over ``CounterSampler``'s choices.

On the shipped tiny model and on a Qwen3-0.6B-shaped stand-in (its config but for depth and width, the 151,936-token
vocabulary, Qwen3's special tokens: thai_grpo_tools.rehearsal), merged and as a PeftModel, sampled and greedy, with
rows that stop at different steps: the same token ids in float32. In 16 bits the two paths add in other orders, so a
row may part from today's where its uniform falls within rounding of a boundary of today's distribution, and nowhere
else."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from thai_grpo.data.prompts import SYSTEM_PROMPT
from thai_grpo.models.sampling import (CounterSampler, encode_prompts, generation_config, row_seeds, sample_continuations,
                                       seeded_per_row, stop_token_ids)

SHIPPED = Path(__file__).resolve().parents[1] / "assets" / "tiny-base"
QUESTIONS = ["มีแอปเปิล 3 ผล ได้อีก 4 ผล มีกี่ผล", "2 บวก 2", "ร้านขายส้ม 12 ผล ขายไป 5 ผล เหลือกี่ผล แล้วซื้อเพิ่ม 7",
             "10 ลบ 4", "5 คูณ 2 แล้วบวก 1", "มีนก 9 ตัว บินไป 3 ตัว"]
SAMPLED, GREEDY = (4, 1.0), (1, None)  # (samples per prompt, temperature)
NEAR_TIE_UNITS = 8  # 16 bits: units in the last place (of a probability) two paths' roundings may part by


def todays_path(model, encoded, config, seeds):
    """What held-out sampling ran before the decode loop: ``generate`` with each prompt prefilled once."""
    from thai_grpo.models.cpu.shared_prefix import generate_sharing_prompts

    greedy, processors = seeded_per_row(config, seeds, model.device, encoded["input_ids"].shape[1])
    with torch.no_grad():
        return generate_sharing_prompts(model, encoded["input_ids"], encoded["attention_mask"], greedy,
                                        logits_processor=processors)


def stop_steps(output, prompt_width: int, stop_ids: list[int]) -> list[int | None]:
    """Each row's step of its first stop token (None: it ran to the budget)."""
    return [next((step for step, token in enumerate(row[prompt_width:].tolist()) if token in stop_ids), None)
            for row in output]


@pytest.fixture(scope="module")
def shipped():
    from thai_grpo.models.loading import load_policy, load_tokenizer

    tokenizer = load_tokenizer(SHIPPED / "base")
    models = {"merged": load_policy(SHIPPED / "base", SHIPPED / "sft_adapter", merged=True).eval(),
              "peft": load_policy(SHIPPED / "base", SHIPPED / "sft_adapter").eval()}
    return models, tokenizer, encode_prompts(tokenizer, QUESTIONS, SYSTEM_PROMPT, {})


@pytest.fixture(scope="module")
def standin():
    """Qwen3-0.6B's config at the rehearsal's depth and width with the real vocabulary and special tokens, taught
    briefly (a think block when the prompt leaves thinking on, the number at once when it is off) as the rehearsal's
    stand-in is; plain, and with a LoRA adapter of the rehearsal's shape whose B is not zero; prompts with thinking on
    and off in one batch, so that rows stop at different steps."""
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from thai_grpo_tools.rehearsal import (QWEN3_0_6B_CONFIG, QWEN3_ADDED_TOKENS, QWEN3_GENERATION_CONFIG,
                                           STANDIN_ADAPTER, STANDIN_SIZES, THINKING_ON, compact_ids, learned_size,
                                           standin_tokenizer, teach, teaching_examples, unused_row, widen_vocabulary)

    tokenizer = standin_tokenizer([SYSTEM_PROMPT, *QUESTIONS, THINKING_ON], vocab_size=300)
    learned, config = learned_size(tokenizer), {**QWEN3_0_6B_CONFIG, **STANDIN_SIZES}
    torch.manual_seed(0)
    compact = Qwen3ForCausalLM(Qwen3Config(**{**config, "torch_dtype": "float32", "bos_token_id": None,
                                              "eos_token_id": None,
                                              "vocab_size": learned + len(QWEN3_ADDED_TOKENS)}))
    examples = [(compact_ids(prompt, learned), compact_ids(completion, learned))
                for prompt, completion in teaching_examples(tokenizer, QUESTIONS, SYSTEM_PROMPT)]
    teach(compact, examples, compact_ids([tokenizer.pad_token_id], learned)[0], steps=120, learning_rate=6e-3)
    with torch.no_grad():
        taught = torch.cat([compact.model(input_ids=torch.tensor([p + c])).last_hidden_state[0] for p, c in examples])
    filler = unused_row(compact, taught, taught[:1])  # the unused ids' row, held below the taught tokens
    model, adapted = (widen_vocabulary(compact, learned, config, filler) for _ in range(2))
    adapted = get_peft_model(adapted, LoraConfig(task_type="CAUSAL_LM", **STANDIN_ADAPTER))
    for each in (model, adapted):
        each.eval().generation_config.update(**QWEN3_GENERATION_CONFIG)
    with torch.no_grad():
        for name, parameter in adapted.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.01)
    texts = [tokenizer.apply_chat_template([{"role": "system", "content": SYSTEM_PROMPT},
                                            {"role": "user", "content": question}], tokenize=False,
                                           add_generation_prompt=True, enable_thinking=index % 2 == 0)
             for index, question in enumerate(QUESTIONS)]
    tokenizer.padding_side = "left"
    encoded = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    return {"plain": model, "peft": adapted}, tokenizer, encoded


def compare(models, tokenizer, encoded, kind: str, samples: int, temperature, budget: int):
    """(today's output, the decode loop's output, stop ids) for one model and setting."""
    model = models[kind]
    stop_ids = stop_token_ids(model, tokenizer)
    config = generation_config(tokenizer, stop_ids, samples, budget, temperature)
    seeds = row_seeds(7, range(len(QUESTIONS)), samples)
    return todays_path(model, encoded, config, seeds), sample_continuations(model, encoded["input_ids"],
                                                                            encoded["attention_mask"], config,
                                                                            seeds), stop_ids


@pytest.mark.parametrize("kind", ["merged", "peft"])
@pytest.mark.parametrize("samples, temperature", [SAMPLED, GREEDY], ids=["sampled", "greedy"])
def test_the_shipped_model_samples_what_todays_path_samples(shipped, kind, samples, temperature):
    today, ours, stop_ids = compare(*shipped, kind, samples, temperature, budget=24)
    assert torch.equal(today, ours)
    steps = stop_steps(today, shipped[2]["input_ids"].shape[1], stop_ids)
    assert None in steps and len({step for step in steps if step is not None}) > 1  # rows stop at different steps


@pytest.mark.parametrize("kind", ["plain", "peft"])
@pytest.mark.parametrize("samples, temperature", [SAMPLED, GREEDY], ids=["sampled", "greedy"])
def test_the_qwen3_shaped_standin_samples_what_todays_path_samples(standin, kind, samples, temperature):
    models, tokenizer, encoded = standin
    today, ours, stop_ids = compare(models, tokenizer, encoded, kind, samples, temperature, budget=40)
    assert torch.equal(today, ours)
    assert stop_ids == [151645, 151643]  # Qwen3's <|im_end|>, then <|endoftext|>
    steps = stop_steps(today, encoded["input_ids"].shape[1], stop_ids)
    assert len(set(steps)) > 1, steps


def test_a_prompt_is_held_once_and_a_steps_shape_changes_only_when_its_bucket_does(standin, monkeypatch):
    """The prefill runs each prompt once; every decode step runs all rows of its bucket (finished rows masked, not
    removed), so its row count is a bucket of ``row_buckets`` x samples and changes only at a stop check; the
    completion buffers are allocated once, as long as the budget, and moved only when the bucket shrinks (here: at
    least once, as prompts finish); the prompts' keys have one row per prompt."""
    import thai_grpo.models.decoding as decoding

    models, tokenizer, encoded = standin
    model, budget, prompt_width = models["plain"], 40, encoded["input_ids"].shape[1]
    stop_ids = stop_token_ids(model, tokenizer)
    config = generation_config(tokenizer, stop_ids, SAMPLED[0], budget, SAMPLED[1])
    seeds = row_seeds(7, range(len(QUESTIONS)), SAMPLED[0])
    today = todays_path(model, encoded, config, seeds)
    forwards, buffers = [], []
    hook = model.get_input_embeddings().register_forward_pre_hook(lambda _, args: forwards.append(args[0].shape))

    def recorded_step(model, tokens, cache):
        buffers.append((cache.keys[0].data_ptr(), cache.keys[0].shape[2], cache.prompt_keys[0].shape[0]))
        return decoding.decode_step(model, tokens, cache)

    try:
        with torch.no_grad():
            new_tokens = decoding.decode(model, encoded["input_ids"], encoded["attention_mask"], SAMPLED[0], budget,
                                         stop_ids, tokenizer.pad_token_id,
                                         CounterSampler(SAMPLED[1], seeds, model.device).choose, step=recorded_step)
    finally:
        hook.remove()
    assert torch.equal(today[:, prompt_width:], new_tokens)
    assert forwards[0] == (len(QUESTIONS), prompt_width)
    steps = [shape[0] for shape in forwards[1:]]
    allowed = {prompts * SAMPLED[0] for prompts in decoding.row_buckets(len(QUESTIONS))}
    assert set(steps) <= allowed and all(shape[1] == 1 for shape in forwards[1:])
    for column in range(1, len(steps)):  # a bucket shrinks only before a step that follows a stop check
        shrunk = steps[column] < steps[column - 1]
        assert steps[column] == steps[column - 1] or (shrunk and (column + 1) % decoding.STOP_CHECK_EVERY == 0), steps
    assert all(length == budget for _, length, _ in buffers)
    prompts_held = [held for _, _, held in buffers]
    assert prompts_held[0] == len(QUESTIONS) and min(prompts_held) < len(QUESTIONS)  # compacted on the way
    for (pointer, _, held), (next_pointer, _, next_held) in zip(buffers, buffers[1:]):
        assert (pointer == next_pointer) == (held == next_held)  # moved when compacted, and only then


def test_a_greedy_row_beside_the_samples_gives_the_greedy_calls_tokens(standin):
    """One call with each prompt's greedy answer as one more row of its group (seed None: no noise, sharing the
    prompt's cache) gives, row for row, the samples of a call without it and the tokens of a separate greedy call."""
    models, tokenizer, encoded = standin
    model, samples, budget = models["peft"], SAMPLED[0], 40
    stop_ids = stop_token_ids(model, tokenizer)
    seeds = row_seeds(7, range(len(QUESTIONS)), samples)
    with_greedy = [seed for start in range(0, len(seeds), samples) for seed in (*seeds[start:start + samples], None)]
    together = sample_continuations(model, encoded["input_ids"], encoded["attention_mask"],
                                    generation_config(tokenizer, stop_ids, samples + 1, budget, 1.0), with_greedy)
    sampled = sample_continuations(model, encoded["input_ids"], encoded["attention_mask"],
                                   generation_config(tokenizer, stop_ids, samples, budget, 1.0), seeds)
    greedy = sample_continuations(model, encoded["input_ids"], encoded["attention_mask"],
                                  generation_config(tokenizer, stop_ids, 1, budget, None), [None] * len(QUESTIONS))
    width = min(together.shape[1], sampled.shape[1], greedy.shape[1])
    grouped = together.view(len(QUESTIONS), samples + 1, -1)
    assert torch.equal(grouped[:, :samples].reshape(-1, together.shape[1])[:, :width], sampled[:, :width])
    assert torch.equal(grouped[:, samples, :width], greedy[:, :width])
    assert not torch.equal(grouped[:, 0, :width], greedy[:, :width])  # the samples are not the greedy answers


def test_one_bucket_step_compiles_whole_and_gives_the_eager_steps_tokens(shipped):
    """``graphed_step`` (``torch.compile(decode_step, fullgraph=True)``, CUDA graphs where there is CUDA) on one
    bucket: no graph break (fullgraph raises on one), and the compiled steps give the eager steps' tokens over a
    whole call."""
    import thai_grpo.models.decoding as decoding

    models, tokenizer, encoded = shipped
    model = models["merged"]
    stop_ids = stop_token_ids(model, tokenizer)
    seeds = row_seeds(3, range(len(QUESTIONS)), 2)

    def run(step):
        with torch.no_grad():
            return decoding.decode(model, encoded["input_ids"], encoded["attention_mask"], 2, 16, stop_ids,
                                   tokenizer.pad_token_id, CounterSampler(1.0, seeds, model.device).choose,
                                   check_every=16, step=step)

    assert torch.equal(run(decoding.graphed_step()), run(decoding.decode_step))


def test_ppos_rollouts_are_what_policy_generate_gave():
    """PPO's ``generate_by_chunks`` (one sample per prompt, at PPO's temperature, any chunk size) against the plain
    ``policy.generate`` it called before, on the shipped tiny base + SFT adapter."""
    from thai_grpo.methods.ppo import generate_by_chunks
    from thai_grpo.models.loading import load_policy, load_tokenizer

    policy = load_policy(SHIPPED / "base", SHIPPED / "sft_adapter", merged=True).eval()
    tokenizer = load_tokenizer(SHIPPED / "base")
    encoded = encode_prompts(tokenizer, QUESTIONS, SYSTEM_PROMPT, {})
    config = generation_config(tokenizer, stop_token_ids(policy, tokenizer), 1, 20, 0.7)
    seeds = row_seeds(3, range(len(QUESTIONS)), 1)
    greedy, processors = seeded_per_row(config, seeds, policy.device, encoded["input_ids"].shape[1])
    with torch.no_grad():
        before = policy.generate(**encoded, generation_config=greedy, logits_processor=processors)
    for per_chunk in (1, 4, len(QUESTIONS)):
        assert torch.equal(generate_by_chunks(policy, encoded, config, per_chunk, tokenizer.pad_token_id, seeds),
                           before)


def first_parting(today, ours, pad_id: int) -> list[int | None]:
    """Per row, the first step where the two outputs differ (None: identical)."""
    width = max(today.shape[1], ours.shape[1])
    today, ours = (torch.nn.functional.pad(out, (0, width - out.shape[1]), value=pad_id) for out in (today, ours))
    return [None if torch.equal(a, b) else int((a != b).nonzero()[0]) for a, b in zip(today, ours)]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("run", ["ppo_autocast", "evaluation"])
def test_in_16_bits_a_row_parts_from_todays_only_at_a_near_tie(dtype, run):
    """16-bit frozen weights under the LoRA adapter (float32): under autocast as PPO's rollouts on a GPU run, or without
    as a 16-bit evaluation (eval.dtype) runs. Today's path attends with SDPA over each row's joined keys, the decode
    loop over the prompt's and the completion's keys apart, so their 16-bit roundings differ: a row may take another
    token where its uniform fell within a few units in the last place of the dtype of a boundary of today's
    cumulative distribution (its two candidates' probabilities split there). Everywhere else the rows agree, token for
    token; most rows never part."""
    from thai_grpo.methods.ppo import autocast_like
    from thai_grpo.models.loading import load_policy, load_tokenizer
    from thai_grpo.models.sampling import counter_uniforms

    policy = load_policy(SHIPPED / "base", SHIPPED / "sft_adapter", dtype=dtype).eval()
    tokenizer = load_tokenizer(SHIPPED / "base")
    encoded = encode_prompts(tokenizer, QUESTIONS, SYSTEM_PROMPT, {})
    samples, budget, width = 4, 40, encoded["input_ids"].shape[1]
    config = generation_config(tokenizer, stop_token_ids(policy, tokenizer), samples, budget, 1.0)
    seeds = row_seeds(11, range(len(QUESTIONS)), samples)
    config.return_dict_in_generate, config.output_logits = True, True  # today's logits, step by step
    context = autocast_like(policy) if run == "ppo_autocast" else torch.autocast("cpu", enabled=False)
    with context:
        today = todays_path(policy, encoded, config, seeds)
        ours = sample_continuations(policy, encoded["input_ids"], encoded["attention_mask"], config, seeds)
    parted = first_parting(today.sequences, ours, tokenizer.pad_token_id)
    unit = torch.finfo(getattr(torch, dtype)).eps
    for row, step in enumerate(parted):
        if step is not None:  # where today's uniform fell in today's distribution, and the nearest boundary
            cumulative = torch.softmax(today.logits[step - width][row].double(), -1).cumsum(-1)
            drawn = float(counter_uniforms(torch.tensor([seeds[row]]), step - width)[0])
            taken = int(today.sequences[row, step])
            edges = (float(cumulative[taken - 1]) if taken else 0.0, float(cumulative[taken]))
            assert min(abs(drawn - edge) for edge in edges) <= NEAR_TIE_UNITS * unit, (row, step - width, edges, drawn)
    assert sum(step is None for step in parted) > len(parted) // 2, parted


def test_a_decode_steps_host_work_does_not_grow_with_the_rows():
    """Counted by torch's profiler on the Qwen3-shaped stand-in (a smaller vocabulary: the counts do not depend on
    it; ``make bench-sampling`` counts at full size): a decode step dispatches the same operators within 5% at 160 and
    at 1,024 rows, and reads the device from the host once per ``STOP_CHECK_EVERY`` steps, not more."""
    from thai_grpo.models.decoding import STOP_CHECK_EVERY
    from thai_grpo_tools.sampling_bench import compare_rows, standin

    low, high = compare_rows(standin(vocab_size=512), steps=STOP_CHECK_EVERY)
    assert abs(high["ops_per_step"] / low["ops_per_step"] - 1) <= 0.05, (low, high)
    assert low["syncs_per_step"] == high["syncs_per_step"] == 1 / STOP_CHECK_EVERY, (low, high)
