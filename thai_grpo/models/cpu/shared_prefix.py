"""Shared prompts computed once: a GRPO group's G completions continue one prompt, so its keys and values are computed
once per distinct prompt and copied to its rows, in sampling and the log-prob passes (same samples, same sums up to
order)."""

from __future__ import annotations

import contextlib
import copy

from thai_grpo.models.positions import generation_positions


def distinct_rows(input_ids, attention_mask):
    """(first, inverse): ``first`` = the index of the first row of each distinct (ids, mask) row, in order of first
    appearance; ``inverse[i]`` = the position in ``first`` of row i's prompt."""
    import torch

    keys = torch.cat([input_ids, attention_mask.to(input_ids.dtype)], dim=1)
    _, inverse, counts = torch.unique(keys, dim=0, return_inverse=True, return_counts=True)
    # torch.unique sorts; renumber the distinct rows by first appearance, so that "first" keeps the batch's order
    first_of_sorted = torch.full((len(counts),), keys.size(0), dtype=torch.long, device=keys.device)
    first_of_sorted.scatter_reduce_(0, inverse, torch.arange(keys.size(0), device=keys.device), reduce="amin")
    order = torch.argsort(first_of_sorted)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(len(order), device=order.device)
    return first_of_sorted[order], rank[inverse]


def prompt_cache(model, input_ids, attention_mask, width: int, first, inverse, position_ids=None):
    """The cache of positions ``[0, width)`` computed on the distinct rows ``first`` only, then one copy per row
    (``inverse``); differentiable with grad enabled. ``position_ids``: the batch's, None for the model's own."""
    extra = {} if position_ids is None else {"position_ids": position_ids[first, :width]}
    outputs = model(input_ids=input_ids[first, :width], attention_mask=attention_mask[first, :width], use_cache=True,
                    logits_to_keep=1, **extra)
    cache = outputs.cache
    cache.batch_select_indices(inverse)
    return cache


def generate_sharing_prompts(model, input_ids, attention_mask, generation_config, generate=None, **kwargs):
    """``generate`` (default ``model.generate``) with each distinct prompt prefilled once, all but its last position,
    which ``generate`` starts from; ``num_return_sequences`` copies too."""
    import torch

    generate = generate or model.generate

    copies = generation_config.num_return_sequences or 1
    if copies > 1:
        input_ids = input_ids.repeat_interleave(copies, dim=0)
        attention_mask = attention_mask.repeat_interleave(copies, dim=0)
        generation_config = copy.deepcopy(generation_config)
        generation_config.num_return_sequences = 1
    first, inverse = distinct_rows(input_ids, attention_mask)
    if len(first) == input_ids.size(0) or input_ids.size(1) < 2:
        return generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config,
                        **kwargs)
    with torch.no_grad():
        cache = prompt_cache(model, input_ids, attention_mask, input_ids.size(1) - 1, first, inverse,
                             position_ids=generation_positions(attention_mask))
    return generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config,
                    cache=cache, **kwargs)


def completion_logprobs_sharing_prompts(model, input_ids, attention_mask, logits_to_keep: int,
                                        compute_entropy: bool, autocast):
    """Per-token log-probs (and entropies, else None) of each row's last ``logits_to_keep`` positions by TRL's fused LM
    head, each distinct prompt computed once; None when no prompt repeats. ``autocast``: the trainer's."""
    prompt_width = input_ids.size(1) - logits_to_keep
    first, inverse = distinct_rows(input_ids[:, :prompt_width], attention_mask[:, :prompt_width])
    if len(first) == input_ids.size(0) or prompt_width < 2:
        return None
    with autocast():
        # the prompt's last position is run again with the completion: its output scores the first completion token
        cache = prompt_cache(model, input_ids, attention_mask, prompt_width - 1, first, inverse)
        tail = input_ids[:, prompt_width - 1:]
        labels = tail.masked_fill(attention_mask[:, prompt_width - 1:] == 0, -100)
        outputs = model(input_ids=tail, attention_mask=attention_mask, cache=cache, labels=labels, fused_lm_head=True)
    entropies = outputs.entropy[:, -logits_to_keep:] if compute_entropy else None
    return outputs.log_probs[:, -logits_to_keep:], entropies


@contextlib.contextmanager
def scoring_labelled_positions_only():
    """TRL's fused LM head projecting only the labelled positions on a CPU too (TRL compacts on Triton devices only; at
    Qwen3's 151,936 words every position is most of a CPU step). Rows are scored alone: the same numbers."""
    import trl.trainer.utils as trl_utils

    on_triton = trl_utils._use_triton
    trl_utils._use_triton = lambda device: device.type == "cpu" or on_triton(device)
    try:
        yield
    finally:
        trl_utils._use_triton = on_triton
