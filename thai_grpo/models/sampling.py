"""Held-out sampling: n completions per problem at the evaluation temperature, plus one greedy answer, as GRPO's
rollouts sample (no top-k/top-p, the same chat template, stop tokens and budget). Each sample's noise is a hash of (its
seed from (seed, problem id, sample index), its column), so a config gives the same samples whatever the batch, on the
same machine and card (another card, or a CPU, rounds the logits differently)."""

from __future__ import annotations

import copy
import hashlib

from thai_grpo.core.rewards import reward_breakdown
from thai_grpo.data.prompts import chat_prompt_texts


def tf32_switch() -> str | None:
    """The setting (legacy flags or the ``fp32_precision`` API) that lets torch use TF32 matmuls, or None."""
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
    """The device's name and float32 matmul precision an evaluation computes in, called in the sampling process before
    the first sample: float32 refuses TF32 matmuls, whose 10-bit mantissa errs as much as the chapter's whole update."""
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


def right_padded(sequences: list[list[int]], pad_id: int):
    """(ids, attention mask) of token-id lists right-padded with ``pad_id`` to the longest (TRL's ``pad``)."""
    import torch
    from trl.trainer.utils import pad

    rows = [torch.tensor(sequence, dtype=torch.long) for sequence in sequences]
    return pad(rows, pad_id), pad([torch.ones_like(row) for row in rows], 0)


def stop_token_ids(model, tokenizer) -> list[int]:
    """The ids that end a completion, as TRL's GRPOTrainer collects them: the ``generation_config`` EOS id(s), with
    the tokenizer's EOS first when missing."""
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [] if configured is None else [configured] if isinstance(configured, int) else list(configured)
    return ids if tokenizer.eos_token_id in ids else [tokenizer.eos_token_id, *ids]


def completion_length(ids: list[int], stop_ids: list[int]) -> tuple[int, bool]:
    """(tokens up to and including the first stop token, as TRL's completion mask counts, else all; whether it came)."""
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
    """GRPO's rollout settings: plain sampling at ``temperature`` (no top-k, no top-p), greedy when it is None."""
    from transformers import GenerationConfig

    sampling = temperature is not None
    return GenerationConfig(do_sample=sampling, temperature=temperature if sampling else None,
                            top_k=0 if sampling else None, top_p=1.0 if sampling else None,
                            max_new_tokens=max_new_tokens, num_return_sequences=num_samples, eos_token_id=stop_ids,
                            pad_token_id=tokenizer.pad_token_id)


def row_seeds(seed: int, keys, num_samples: int) -> list[int]:
    """A 63-bit seed per problem of ``keys`` x sample, in ``generate``'s order (a problem's side by side), from the
    sha256 of (seed, key, sample): the same in every process (unlike the salted ``hash``)."""
    names = [f"{seed}/{key}/{sample}" for key in keys for sample in range(num_samples)]
    return [int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little") >> 1 for name in names]


MASK32 = 0xFFFFFFFF
MIX = 0x45D9F3B  # the multiplier of a 32-bit xorshift-multiply hash; x * MIX < 2**59 for any 32-bit x: no overflow


def mix32(x):
    """A 32-bit integer hash (two xorshift-multiply rounds, a final xorshift) of the 32-bit values in int64 ``x``."""
    for _ in range(2):
        x = ((x >> 16) ^ x) * MIX & MASK32
    return (x >> 16) ^ x


def counter_uniforms(seeds, column):
    """One float64 uniform in [0, 1) per row from a hash of (its 63-bit seed, the ``column`` drawn for): a
    counter-based generator, like Philox, with the same bits on every device and for any batch mates."""
    key = mix32(mix32(column + 0x9E3779B9 & MASK32) ^ (seeds >> 32)) ^ (seeds & MASK32)
    high, low = mix32(key), mix32(key ^ 0x85EBCA6B)
    return ((high >> 5) * 2 ** 26 + (low >> 6)).double() * 2.0 ** -53


class CounterSampler:
    """Each row's next token: a draw from softmax(scores / temperature) by the inverse of its distribution function
    (cumulated in float64) at the row's ``counter_uniforms``, or the argmax for a greedy row (seed None); a draw
    depends only on (the row's seed, its column, its scores).

    ``choose`` serves ``decoding.decode``; as a logits processor it leaves 0 on the chosen token and -inf elsewhere,
    so that ``generate``'s greedy decoding over it samples what ``decode`` samples."""

    def __init__(self, temperature: float | None, seeds: list, device, prompt_width: int | None = None):
        import torch

        self.temperature, self.prompt_width = temperature, prompt_width
        self.seeds = torch.tensor([seed or 0 for seed in seeds], dtype=torch.long, device=device)
        self.greedy = torch.tensor([seed is None or temperature is None for seed in seeds], device=device)

    def choose(self, scores, rows, column):
        """The next token of rows ``rows`` (a tensor of row indices) from their float32 ``scores``."""
        import torch

        if self.temperature is None:
            return scores.argmax(-1)
        tempered = scores if self.temperature == 1 else scores / self.temperature
        cumulative = torch.softmax(tempered, -1).double().cumsum_(-1)  # float64 sums, no third copy held
        drawn = cumulative[:, -1:] * counter_uniforms(self.seeds[rows], column).unsqueeze(1)
        sampled = torch.searchsorted(cumulative, drawn, right=True).squeeze(1).clamp_(max=scores.shape[-1] - 1)
        return torch.where(self.greedy[rows], scores.argmax(-1), sampled)

    def __call__(self, input_ids, scores):
        import torch

        if scores.shape[0] != len(self.seeds):
            raise ValueError(f"CounterSampler got {scores.shape[0]} rows for {len(self.seeds)} seeds: give one seed "
                             "per generated row (problems x samples)")
        rows = torch.arange(len(self.seeds), device=scores.device)
        chosen = self.choose(scores.float(), rows, input_ids.shape[1] - (self.prompt_width or 0))
        return torch.full_like(scores, float("-inf")).scatter_(1, chosen.unsqueeze(1), 0.0)


def seeded_per_row(config, seeds: list, device, prompt_width: int):
    """(generation config, logits processors) with which ``generate`` samples what ``sample_continuations`` does."""
    from transformers import LogitsProcessorList

    if not config.do_sample:
        return config, LogitsProcessorList()
    greedy = copy.deepcopy(config)
    greedy.do_sample, greedy.temperature, greedy.top_k, greedy.top_p = False, None, None, None
    return greedy, LogitsProcessorList([CounterSampler(config.temperature, seeds, device, prompt_width)])


def sample_continuations(model, input_ids, attention_mask, config, seeds: list, cuda_graphs: bool = False):
    """What ``model.generate`` returns under ``seeded_per_row`` (prompts, then new tokens), row i drawn from
    ``seeds[i]`` (None: greedy), computed by ``decoding.decode`` (its steps as CUDA graphs when ``cuda_graphs``)."""
    import torch

    from thai_grpo.models.decoding import decode, decode_step, graphed_step

    stops, samples = config.eos_token_id, config.num_return_sequences or 1
    sampler = CounterSampler(config.temperature if config.do_sample else None, seeds, input_ids.device)
    new_tokens = decode(model, input_ids, attention_mask, samples, config.max_new_tokens,
                        [stops] if isinstance(stops, int) else list(stops), config.pad_token_id, sampler.choose,
                        step=graphed_step() if cuda_graphs else decode_step)
    return torch.cat([input_ids.repeat_interleave(samples, dim=0), new_tokens], dim=1)


def generate(model, tokenizer, questions: list[str], system_prompt: str, num_samples: int, max_new_tokens: int,
             temperature: float | None, seed: int, chat_template_kwargs: dict | None = None,
             problem_keys: list | None = None, with_greedy: bool = False, cuda_graphs: bool = False
             ) -> list[list[dict]]:
    """Per question, ``num_samples`` completions (``completion_record``), then its greedy answer when ``with_greedy``.
    Sample j of question i is drawn from the seed of (seed, ``problem_keys[i]`` or i, j), whatever else is batched."""
    encoded = encode_prompts(tokenizer, questions, system_prompt, chat_template_kwargs or {}).to(model.device)
    stop_ids = stop_token_ids(model, tokenizer)
    rows = num_samples + with_greedy
    config = generation_config(tokenizer, stop_ids, rows, max_new_tokens, temperature)
    keys = list(range(len(questions))) if problem_keys is None else list(problem_keys)
    sampled = row_seeds(seed, keys, num_samples)
    seeds = [s for i in range(len(keys))
             for s in (*sampled[i * num_samples:(i + 1) * num_samples], *[None] * with_greedy)]
    output = sample_continuations(model, encoded["input_ids"], encoded["attention_mask"], config, seeds, cuda_graphs)
    new_tokens = output[:, encoded["input_ids"].shape[1]:]
    completions = [completion_record(tokenizer, row.tolist(), stop_ids) for row in new_tokens]
    return [completions[i * rows:(i + 1) * rows] for i in range(len(questions))]


def score_completion(completion: dict, gold: int) -> dict:
    return {**completion, **reward_breakdown(completion["text"], gold)}


def records_from_completions(rows: list[dict], sampled: list[list[dict]], greedy: list[dict]) -> list[dict]:
    """The output records of ``sample_heldout``: per problem its scored samples and its scored greedy answer."""
    return [{"id": row["id"], "question": row["question"], "gold": row["answer"],
             "completions": [score_completion(c, row["answer"]) for c in samples],
             "greedy": score_completion(best, row["answer"])}
            for row, samples, best in zip(rows, sampled, greedy, strict=True)]


def sampled_groups(model, tokenizer, rows: list[dict], system_prompt: str, num_samples: int, max_new_tokens: int,
                   temperature: float, batch_size: int, seed: int, chat_template_kwargs: dict | None = None,
                   progress=None, with_greedy: bool = False, cuda_graphs: bool = False) -> list[list[dict]]:
    """``generate``'s group of each problem of ``rows``, seeded by its id, ``batch_size`` problems per call (which
    changes no sample)."""
    groups: list[list[dict]] = []
    for start in range(0, len(rows), batch_size):
        batch = rows[start:start + batch_size]
        groups += generate(model, tokenizer, [row["question"] for row in batch], system_prompt, num_samples,
                           max_new_tokens, temperature, seed=seed, chat_template_kwargs=chat_template_kwargs,
                           problem_keys=[row["id"] for row in batch], with_greedy=with_greedy, cuda_graphs=cuda_graphs)
        if progress:
            progress(f"sampled {len(groups)}/{len(rows)} problems x {num_samples}{' and greedy' * with_greedy}")
    return groups


def sample_heldout(model, tokenizer, rows: list[dict], system_prompt: str, num_samples: int, max_new_tokens: int,
                   temperature: float, batch_size: int, seed: int, chat_template_kwargs: dict | None = None,
                   progress=None, cuda_graphs: bool = False) -> list[dict]:
    """One record per held-out problem: its sampled completions and its greedy answer, each with rewards."""
    groups = sampled_groups(model, tokenizer, rows, system_prompt, num_samples, max_new_tokens, temperature,
                            batch_size, seed, chat_template_kwargs, progress, with_greedy=True, cuda_graphs=cuda_graphs)
    return records_from_completions(rows, [group[:-1] for group in groups], [group[-1] for group in groups])
