"""Shared prompts computed once: the G completions of a GRPO group all continue the same prompt, so its keys and values
are computed once per distinct prompt and copied to its rows (held-out sampling and PPO's rollouts go further, holding
each prompt once without copies: ``thai_grpo.models.decoding``). The arithmetic is that of every row in full, up to
the order of floating-point sums (~1e-6), and a seeded run draws the same samples.

- ``distinct_rows``: which rows of a batch hold the same prompt (ids and mask).
- ``prompt_cache``: the key/value cache of the distinct prompts' first ``width`` positions, one copy per row.
- ``generate_sharing_prompts``: ``model.generate`` that prefills each distinct prompt once.
- ``completion_logprobs_sharing_prompts``: per-token log-probs (and entropies) of the completions through TRL's fused
  LM head, the prompt computed once; gradients flow into the shared prompt.
- ``scoring_labelled_positions_only``: TRL's fused LM head on a CPU projects the completion positions only, as it does
  on a GPU, for the passes that cannot share their prompts.
"""

from __future__ import annotations

import contextlib
import copy

from thai_grpo.models.positions import generation_positions


def distinct_rows(input_ids, attention_mask):
    """(first, inverse): ``first`` = the index of the first row of each distinct (ids, mask) row, in order of first
    appearance; ``inverse[i]`` = the position in ``first`` of row i's prompt. Rows are equal only when every id and
    mask value is."""
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
    """The cache of positions ``[0, width)`` computed on the distinct rows ``first`` only, then one copy per row of
    the batch (``inverse``); differentiable when called with grad enabled (the copies' gradients add up).
    ``position_ids``: the batch's (all rows), None for the model's own column numbering."""
    extra = {} if position_ids is None else {"position_ids": position_ids[first, :width]}
    outputs = model(input_ids=input_ids[first, :width], attention_mask=attention_mask[first, :width], use_cache=True,
                    logits_to_keep=1, **extra)
    cache = outputs.cache
    cache.batch_select_indices(inverse)
    return cache


def generate_sharing_prompts(model, input_ids, attention_mask, generation_config, generate=None, **kwargs):
    """``model.generate(input_ids, attention_mask, generation_config)`` with each distinct prompt prefilled once.

    ``num_return_sequences`` > 1 is applied here (rows repeated in place, as ``generate`` does), so the prompts of
    all samples are shared too. With no repeated prompt this is plain ``generate``. The last prompt position is left
    to ``generate`` itself, which always needs one new position to start from. ``generate``: the generate function
    to call (default ``model.generate``; a caller that replaced it passes the original).
    """
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
    """Per-token log-probs (and entropies, else None) of the last ``logits_to_keep`` positions of each row, as TRL's
    ``_get_per_token_logps_and_entropies`` computes them with its fused LM head (``add_fused_lm_head``), but with the
    prompt (every position before them) computed once per distinct prompt. None when no prompt repeats (the caller
    then runs TRL's own pass). ``autocast``: the trainer's autocast context manager factory."""
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
    """Within this block, TRL's fused LM head (``trl.trainer.utils.add_fused_lm_head``) projects only the positions
    that have a label on a CPU, as it does on a GPU.

    TRL 1.16 compacts the batch to its labelled positions (the completion tokens) on Triton devices only; elsewhere
    it projects every position, prompt and padding included, and masks their results to 0 afterwards, to keep the tile
    shapes fixed for compiling backends (Neuron's). A CPU runs eagerly, so that is only waste, and at Qwen3's 151,936
    words it is most of a step: the real config on CPU stand-ins (8 completions of <= 24 tokens after ~100 prompt
    tokens) sent 840-1000 rows through the vocabulary tiles instead of <= 192. The kernel scores each row on its own,
    so every labelled position gets the same log-prob, entropy and gradient either way (tests/test_shared_prefix.py).
    The kernel's choice (TRL's torch tiles on a CPU, Triton on a GPU) is left as it is: only the row selection moves.
    """
    import trl.trainer.utils as trl_utils

    on_triton = trl_utils._use_triton
    trl_utils._use_triton = lambda device: device.type == "cpu" or on_triton(device)
    try:
        yield
    finally:
        trl_utils._use_triton = on_triton
