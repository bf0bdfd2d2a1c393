"""Held-out sampling: n completions per problem at the evaluation temperature, plus one greedy answer.

Sampling follows GRPO's rollouts (no top-k/top-p, the same chat template, stop tokens and completion budget). Each
sample draws its noise from its own generator seeded from (seed, problem id, sample index), so a config gives the same
samples whatever the batch size or the batch mates, on the same machine and card (another card, or a CPU, rounds and
draws differently: CUDA maps its random stream onto the card's cores).
"""

from __future__ import annotations

import copy
import hashlib

from thai_grpo.core.rewards import reward_breakdown
from thai_grpo.data.prompts import chat_prompt_texts


def tf32_switch() -> str | None:
    """The setting that lets torch compute float32 matmuls in TF32, through the legacy flags
    (``allow_tf32``, ``set_float32_matmul_precision``) or the ``fp32_precision`` API, or None when neither does."""
    import torch

    matmul = torch.backends.cuda.matmul
    if matmul.fp32_precision == "tf32" or (matmul.fp32_precision == "none" and torch.backends.fp32_precision == "tf32"):
        return (f"torch.backends.cuda.matmul.fp32_precision={matmul.fp32_precision!r}, "
                f"torch.backends.fp32_precision={torch.backends.fp32_precision!r}")
    try:
        precision = torch.get_float32_matmul_precision()
    except RuntimeError:  # torch refuses to read it once the two APIs were mixed
        return "a mix of the legacy and the fp32_precision APIs"
    if precision != "highest" or matmul.allow_tf32:
        return f"float32 matmul precision {precision!r}, allow_tf32={matmul.allow_tf32}"
    return None


def evaluation_precision(dtype: str, device) -> dict:
    """The device's name and float32 matmul precision an evaluation computes in. A float32 evaluation refuses TF32
    matmuls (either torch API): their 10-bit mantissa errs as much as the chapter's whole update. Call it before the
    first sample, in the process that samples."""
    import torch

    device = torch.device(device)
    if dtype == "float32" and (switch := tf32_switch()) is not None:
        raise RuntimeError(f"a float32 evaluation with TF32 matmuls on ({switch}) computes with float16's mantissa: "
                           "turn TF32 off (torch.backends.cuda.matmul.fp32_precision = 'ieee')")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"device": name, "matmul_precision": "highest" if dtype == "float32" else f"{dtype} weights"}


def encode_prompts(tokenizer, questions: list[str], system_prompt: str, chat_template_kwargs: dict):
    """The chat prompts of ``questions``, left-padded into one batch (what ``generate`` continues)."""
    texts = chat_prompt_texts(tokenizer, questions, system_prompt, chat_template_kwargs)
    tokenizer.padding_side = "left"
    return tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)


def stop_token_ids(model, tokenizer) -> list[int]:
    """The ids that end a completion, as TRL's GRPOTrainer collects them: the ``generation_config`` EOS id(s), with
    the tokenizer's EOS first when missing."""
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [] if configured is None else [configured] if isinstance(configured, int) else list(configured)
    return ids if tokenizer.eos_token_id in ids else [tokenizer.eos_token_id, *ids]


def completion_length(ids: list[int], stop_ids: list[int]) -> tuple[int, bool]:
    """(tokens of a row up to and including its first stop token, as TRL's completion mask counts them, else the
    whole row; whether a stop token came)."""
    stop = next((position for position, token in enumerate(ids) if token in stop_ids), None)
    return (len(ids), False) if stop is None else (stop + 1, True)


def completion_record(tokenizer, ids: list[int], stop_ids: list[int]) -> dict:
    """``{text, num_tokens, truncated, token_ids}`` of one generated row, cut at ``completion_length``. The ids are
    kept: re-tokenizing the text need not give them back (byte-level BPE decodes a partial character to U+FFFD)."""
    length, stopped = completion_length(ids, stop_ids)
    return {"text": tokenizer.decode(ids[:length], skip_special_tokens=True), "num_tokens": length,
            "truncated": not stopped, "token_ids": list(ids[:length])}


def generation_config(tokenizer, stop_ids: list[int], num_samples: int, max_new_tokens: int,
                      temperature: float | None):
    """GRPO's rollout settings as a ``GenerationConfig``: plain sampling at ``temperature`` (no top-k, no top-p), or
    greedy when it is None; ``num_samples`` sequences per prompt; ``stop_ids`` end a completion."""
    from transformers import GenerationConfig

    sampling = temperature is not None
    return GenerationConfig(
        do_sample=sampling, temperature=temperature if sampling else None, top_k=0 if sampling else None,
        top_p=1.0 if sampling else None, max_new_tokens=max_new_tokens, num_return_sequences=num_samples,
        eos_token_id=stop_ids, pad_token_id=tokenizer.pad_token_id,
    )


def row_seeds(seed: int, keys, num_samples: int) -> list[int]:
    """A 63-bit seed per problem of ``keys`` x sample, in ``generate``'s order (a problem's side by side), from the
    sha256 of (seed, key, sample): the same in every process (unlike the salted ``hash``)."""
    names = [f"{seed}/{key}/{sample}" for key in keys for sample in range(num_samples)]
    return [int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little") >> 1 for name in names]


class PerRowGumbel:
    """A logits processor that makes greedy decoding sample: scores / temperature plus Gumbel noise -log(-log U) from
    each row's own generator, so the argmax is an exact draw from softmax(scores / temperature) (Gumbel-max) that
    depends only on the row's seed. With a float32 U, a token ~19 nats below the best (p < 4e-9) is never drawn."""

    def __init__(self, temperature: float, seeds: list[int], device):
        import torch

        self.temperature = float(temperature)
        self.generators = [torch.Generator(device=device).manual_seed(int(seed)) for seed in seeds]

    def __call__(self, input_ids, scores):
        if scores.shape[0] != len(self.generators):
            raise ValueError(f"PerRowGumbel got {scores.shape[0]} rows for {len(self.generators)} seeds: give one "
                             "seed per generated row (problems x samples)")
        return self.perturbed(scores, range(len(self.generators)))

    def perturbed(self, scores, rows):
        """``scores`` of the generated rows ``rows`` (one per score row), tempered and perturbed by their noise."""
        import torch

        noise = torch.empty(scores.shape, dtype=torch.float32, device=scores.device)
        for noise_row, row in zip(noise, rows):
            noise_row.uniform_(generator=self.generators[row])
        noise.clamp_(min=torch.finfo(torch.float32).tiny).log_().neg_().log_().neg_()
        return noise.add_(scores, alpha=1 / self.temperature)


def seeded_per_row(config, seeds: list[int], device):
    """(generation config, logits processors) that sample as ``config`` does, each row from its own seed: greedy
    decoding over ``PerRowGumbel``'s perturbed scores; ``config`` itself when it is greedy."""
    from transformers import LogitsProcessorList

    if not config.do_sample:
        return config, LogitsProcessorList()
    greedy = copy.deepcopy(config)
    greedy.do_sample, greedy.temperature, greedy.top_k, greedy.top_p = False, None, None, None
    return greedy, LogitsProcessorList([PerRowGumbel(config.temperature, seeds, device)])


def seeded_choice(config, seeds: list[int], device):
    """``choose(scores, rows)`` for ``decoding.decode``: the argmax of the float32 scores, Gumbel-perturbed from each
    row's own generator when ``config`` samples (``rows``: indices into ``seeds``)."""
    if not config.do_sample:
        return lambda scores, rows: scores.argmax(-1)
    gumbel = PerRowGumbel(config.temperature, seeds, device)
    return lambda scores, rows: gumbel.perturbed(scores, rows.tolist()).argmax(-1)


def sample_continuations(model, input_ids, attention_mask, config, seeds: list[int]):
    """What ``model.generate(input_ids, attention_mask, generation_config=config)`` returns under ``seeded_per_row``
    (prompts, then new tokens), row i drawn from ``seeds[i]``, computed by ``decoding.decode``."""
    import torch

    from thai_grpo.models.decoding import decode

    stops = config.eos_token_id
    new_tokens = decode(model, input_ids, attention_mask, config.num_return_sequences or 1, config.max_new_tokens,
                        [stops] if isinstance(stops, int) else list(stops), config.pad_token_id,
                        seeded_choice(config, seeds, input_ids.device))
    prompts = input_ids.repeat_interleave(config.num_return_sequences or 1, dim=0)
    return torch.cat([prompts, new_tokens], dim=1)


def generate(model, tokenizer, questions: list[str], system_prompt: str, num_samples: int, max_new_tokens: int,
             temperature: float | None, seed: int, chat_template_kwargs: dict | None = None,
             problem_keys: list | None = None) -> list[list[dict]]:
    """Per question, ``num_samples`` completions ``{text, num_tokens, truncated, token_ids}``; greedy when temperature
    is None. Sample j of question i is drawn from the seed of (seed, ``problem_keys[i]``, j) (``problem_keys``:
    the problems' ids; default their positions in ``questions``), whatever else is in the batch."""
    import torch

    encoded = encode_prompts(tokenizer, questions, system_prompt, chat_template_kwargs or {}).to(model.device)
    stop_ids = stop_token_ids(model, tokenizer)
    config = generation_config(tokenizer, stop_ids, num_samples, max_new_tokens, temperature)
    keys = list(range(len(questions))) if problem_keys is None else list(problem_keys)
    torch.manual_seed(seed)
    output = sample_continuations(model, encoded["input_ids"], encoded["attention_mask"], config,
                                  row_seeds(seed, keys, num_samples))
    new_tokens = output[:, encoded["input_ids"].shape[1]:]
    completions = [completion_record(tokenizer, row.tolist(), stop_ids) for row in new_tokens]
    return [completions[i * num_samples:(i + 1) * num_samples] for i in range(len(questions))]


def score_completion(completion: dict, gold: int) -> dict:
    return {**completion, **reward_breakdown(completion["text"], gold)}


def records_from_completions(rows: list[dict], sampled: list[list[dict]], greedy: list[dict]) -> list[dict]:
    """The output records of ``sample_heldout``: per problem its scored samples and its scored greedy answer."""
    if not len(rows) == len(sampled) == len(greedy):
        raise ValueError(f"{len(rows)} problems but {len(sampled)} sampled and {len(greedy)} greedy results")
    return [{"id": row["id"], "question": row["question"], "gold": row["answer"],
             "completions": [score_completion(c, row["answer"]) for c in samples],
             "greedy": score_completion(best, row["answer"])}
            for row, samples, best in zip(rows, sampled, greedy)]


def sample_heldout(model, tokenizer, rows: list[dict], system_prompt: str, num_samples: int, max_new_tokens: int,
                   temperature: float, batch_size: int, seed: int, chat_template_kwargs: dict | None = None,
                   progress=None) -> list[dict]:
    """One record per held-out problem: its sampled completions and greedy answer, each with rewards. ``batch_size``
    problems per sampling call changes the work, never a sample; the greedy calls take as many problems as fit the
    memory of a sampling call (``greedy_problems_per_call``)."""
    from thai_grpo.jobs.memory_plan import Shape
    from thai_grpo.jobs.memory_stages import greedy_problems_per_call

    questions = [r["question"] for r in rows]
    sampled: list[list[dict]] = []
    for start in range(0, len(rows), batch_size):
        sampled += generate(model, tokenizer, questions[start:start + batch_size], system_prompt, num_samples,
                            max_new_tokens, temperature, seed=seed, chat_template_kwargs=chat_template_kwargs,
                            problem_keys=[row["id"] for row in rows[start:start + batch_size]])
        if progress:
            progress(f"sampled {len(sampled)}/{len(rows)} problems x {num_samples}")
    greedy_batch = greedy_problems_per_call(Shape.from_config(model.config), batch_size, num_samples, max_new_tokens)
    greedy: list[dict] = []
    for start in range(0, len(rows), greedy_batch):
        greedy += [best[0] for best in generate(model, tokenizer, questions[start:start + greedy_batch], system_prompt,
                                                1, max_new_tokens, None, seed=seed,
                                                chat_template_kwargs=chat_template_kwargs)]
    if progress:
        progress(f"greedy answers for {len(greedy)} problems")
    return records_from_completions(rows, sampled, greedy)
