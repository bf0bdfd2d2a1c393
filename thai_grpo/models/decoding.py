"""The decode loop behind held-out sampling and PPO's rollouts: ``generate``'s tokens, with only the work they need.

Machinery a reader of the algorithm can skip. It pre-allocates each layer's completion keys and values, prefills each
prompt once for all its rows (shared-prefix attention, as in Hydragen) and keeps the host out of the steps (fixed shapes
between compactions to a ladder of row buckets, a stop check every ``STOP_CHECK_EVERY`` steps), so a step compiles whole
and replays as a CUDA graph. ``choose`` sees ``generate``'s float32 logits, so the tokens are ``generate``'s. Not
transformers' continuous batching: that draws every row from the global generator, tying a row to its batch mates."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math

from thai_grpo.jobs.memory_plan import COMPACT_WHEN_DONE  # the plan's compaction term depends on it
from thai_grpo.models.positions import generation_positions

ATTENTION = "shared_prompt"  # the name the decode steps' attention is registered under (AttentionInterface)
STOP_CHECK_EVERY = 8  # steps between the loop's questions to the device (have all rows stopped? compact?)
SEEN_BLOCK = 32  # completion columns attended are rounded up to a multiple of this (fewer distinct step shapes)


@dataclasses.dataclass
class SharedPromptCache:
    """Keys and values of a bucket of prompts held once, and of their ``samples`` completions each, pre-allocated.
    Sample s of prompt p is row ``p * samples + s``; per row ``origin`` (its output row), ``finished`` and
    ``first_position``. ``column``: a 0-d tensor, the column the next step writes; ``seen``: the completion columns a
    step attends (a multiple of ``SEEN_BLOCK``); ``blocked``: the step's additive mask over [prompt, seen] columns."""
    prompt_keys: list
    prompt_values: list
    prompt_mask: object
    samples: int
    origin: object
    finished: object
    first_position: object
    keys: list
    values: list
    column: object
    seen: int = 0
    blocked: object = None

    @classmethod
    def allocate(cls, prompt_keys: list, prompt_values: list, prompt_mask, samples: int, budget: int):
        """The cache of freshly prefilled prompts: every row going, every completion buffer as long as ``budget``."""
        import torch

        prompts, (_, kv_heads, _, head_dim) = prompt_mask.shape[0], prompt_keys[0].shape
        device, rows = prompt_mask.device, prompt_mask.shape[0] * samples

        def buffers():
            return [torch.zeros((rows, kv_heads, budget, head_dim), dtype=keys.dtype, device=device)
                    for keys in prompt_keys]

        return cls(prompt_keys, prompt_values, prompt_mask, samples, origin=torch.arange(rows, device=device),
                   finished=torch.zeros(rows, dtype=torch.bool, device=device),
                   first_position=prompt_mask.long().sum(-1).repeat_interleave(samples), keys=buffers(),
                   values=buffers(), column=torch.zeros((), dtype=torch.long, device=device))

    @property
    def prompts(self) -> int:
        return self.prompt_mask.shape[0]

    def write(self, layer: int, key, value) -> None:
        """This step's key and value ([rows, kv heads, 1, head dim]) into every row's column ``column``."""
        self.keys[layer].index_copy_(2, self.column.view(1), key)
        self.values[layer].index_copy_(2, self.column.view(1), value)

    def compact(self, kept) -> None:
        """Only the prompts ``kept`` and their rows, one tensor replaced at a time: at most one layer's kept rows
        beside the cache, never a second cache."""
        import torch

        rows = (kept.unsqueeze(1) * self.samples + torch.arange(self.samples, device=kept.device)).reshape(-1)
        for buffers, index in ((self.prompt_keys, kept), (self.prompt_values, kept), (self.keys, rows),
                               (self.values, rows)):
            for layer in range(len(buffers)):  # in place in the list, one tensor at a time
                buffers[layer] = buffers[layer][index]
        self.prompt_mask = self.prompt_mask[kept]
        self.origin, self.finished, self.first_position = (self.origin[rows], self.finished[rows],
                                                           self.first_position[rows])


def row_buckets(prompts: int) -> list[int]:
    """The prompt counts a decode call's buffers may hold, largest first, each ``COMPACT_WHEN_DONE`` smaller (at least
    one fewer), down to one: few step shapes."""
    sizes = [prompts]
    while sizes[-1] > 1:
        sizes.append(min(sizes[-1] - 1, math.ceil(sizes[-1] * (1 - COMPACT_WHEN_DONE))))
    return sizes


def prompts_to_keep(live: list[bool], size: int) -> list[int]:
    """``size`` buffer prompts, in order: every live one, then as many finished ones as fill the bucket."""
    alive = [index for index, going in enumerate(live) if going]
    done = [index for index, going in enumerate(live) if not going]
    return sorted(alive + done[:size - len(alive)])


def shared_prompt_attention(module, query, key, value, attention_mask, scaling: float, dropout: float = 0.0,
                            shared_prompt: SharedPromptCache | None = None, **kwargs):
    """One decode step's attention: eager attention's arithmetic (float32 softmax) over each row's prompt, then its
    completion up to ``column``, without joining their keys."""
    import torch

    cache = shared_prompt
    layer, groups = module.layer_idx, module.num_key_value_groups
    cache.write(layer, key, value)
    prompts, samples, kv_heads, seen = cache.prompts, cache.samples, key.shape[1], cache.seen
    heads, dim = query.shape[1], query.shape[-1]
    by_prompt = query.view(prompts, samples, kv_heads, groups, dim)
    # against the prompt: one product per prompt, its samples' queries side by side; then against the row's completion
    grid = by_prompt.permute(0, 2, 1, 3, 4).reshape(prompts, kv_heads, samples * groups, dim)
    prompt_scores = torch.matmul(grid, cache.prompt_keys[layer].transpose(2, 3))
    prompt_scores = prompt_scores.view(prompts, kv_heads, samples, groups, -1)
    own_keys = cache.keys[layer][:, :, :seen].view(prompts, samples, kv_heads, seen, dim)
    own_scores = torch.matmul(by_prompt, own_keys.transpose(3, 4)).permute(0, 2, 1, 3, 4)
    scores = torch.cat([prompt_scores, own_scores], dim=-1).mul_(scaling).add_(cache.blocked)
    width = cache.prompt_mask.shape[-1]
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    prompt_weights, own_weights = weights.split([width, seen], dim=-1)
    from_prompt = torch.matmul(prompt_weights.reshape(prompts, kv_heads, samples * groups, -1),
                               cache.prompt_values[layer])
    from_prompt = from_prompt.view(prompts, kv_heads, samples, groups, dim).permute(0, 2, 1, 3, 4)
    own_values = cache.values[layer][:, :, :seen].view(prompts, samples, kv_heads, seen, dim)
    output = from_prompt + torch.matmul(own_weights.permute(0, 2, 1, 3, 4), own_values)
    return output.reshape(prompts * samples, heads, dim).unsqueeze(1), None


@contextlib.contextmanager
def decode_attention(model):
    """Within the block, ``model``'s attention layers run ``shared_prompt_attention``; the model's own afterwards."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, shared_prompt_attention)
    own = model.config._attn_implementation
    model.set_attn_implementation(ATTENTION)
    try:
        yield
    finally:
        model.set_attn_implementation(own)


def prefill(model, input_ids, attention_mask):
    """(float32 logits of each prompt's last position, the prompts' keys and values per layer): one forward pass."""
    from transformers import DynamicCache

    output = model(input_ids=input_ids, attention_mask=attention_mask,
                   position_ids=generation_positions(attention_mask), cache=DynamicCache(config=model.config),
                   use_cache=True, logits_to_keep=1)
    layers = output.cache.layers
    return (output.logits[:, -1].float(), [layer.keys for layer in layers], [layer.values for layer in layers])


def decode_step(model, tokens, cache: SharedPromptCache):
    """The float32 logits after ``tokens`` (one per buffer row), their keys and values written; no host reads."""
    import torch

    masks = {layer_type: None for layer_type in set(model.config.layer_types)}  # the attention masks itself
    ahead = torch.arange(cache.seen, device=cache.column.device) > cache.column  # completion columns not written yet
    hidden = torch.cat([~cache.prompt_mask, ahead.expand(cache.prompts, -1)], dim=-1)
    cache.blocked = torch.zeros(hidden.shape, dtype=cache.prompt_keys[0].dtype, device=hidden.device).masked_fill_(
        hidden, float("-inf"))[:, None, None, None, :]  # added to every layer's scores: -inf where a row may not look
    positions = (cache.first_position + cache.column).unsqueeze(1)
    output = model(input_ids=tokens.unsqueeze(1), position_ids=positions, attention_mask=masks, use_cache=False,
                   shared_prompt=cache)
    return output.logits[:, -1].float()


@functools.cache
def graphed_step():
    """``decode_step`` compiled whole, on CUDA replayed as a graph per row bucket and ``seen`` (``reduce-overhead``);
    one per process so its graphs are kept. Off unless ``eval.cuda_graphs``."""
    import torch

    compiled = torch.compile(decode_step, fullgraph=True, mode="reduce-overhead")

    def step(model, tokens, cache: SharedPromptCache):
        for tensor in (*cache.keys, *cache.values):
            torch._dynamo.mark_static_address(tensor)
        return compiled(model, tokens, cache)

    return step


def record(tokens, cache: SharedPromptCache, chosen, stops, pad_id: int) -> None:
    """``chosen`` into ``tokens`` at ``cache.column`` (``pad_id`` once stopped); rows choosing a stop token finish."""
    import torch

    columns = cache.column.expand_as(cache.origin)
    tokens.index_put_((cache.origin, columns), torch.where(cache.finished, pad_id, chosen))
    cache.finished = cache.finished | torch.isin(chosen, stops)


def generated_width(tokens, stops) -> int:
    """The columns ``generate`` returns: up to the latest row's first stop token, or all when a row never stopped."""
    import torch

    stopped = torch.isin(tokens, stops)
    ends = torch.where(stopped.any(1), stopped.int().argmax(1) + 1, tokens.shape[1])
    return int(ends.max())


def decode(model, input_ids, attention_mask, samples: int, max_new_tokens: int, stop_ids: list[int], pad_id: int,
           choose, check_every: int = STOP_CHECK_EVERY, step=decode_step):
    """``samples`` continuations of each left-padded prompt as ``generate`` returns them ([rows, columns], row
    ``prompt * samples + sample``). ``choose(scores, rows, column)`` picks each next token; ``step``: ``decode_step`` or
    a compiled one."""
    import torch

    rows = input_ids.shape[0] * samples
    tokens = torch.full((rows, max_new_tokens), pad_id, dtype=torch.long, device=input_ids.device)
    stops = torch.tensor(stop_ids, device=input_ids.device)
    buckets = row_buckets(input_ids.shape[0])
    with torch.no_grad():
        logits, prompt_keys, prompt_values = prefill(model, input_ids, attention_mask)
        cache = SharedPromptCache.allocate(prompt_keys, prompt_values, attention_mask.bool(), samples, max_new_tokens)
        chosen = choose(logits.repeat_interleave(samples, 0), cache.origin, cache.column)  # samples share its logits
        del logits
        with decode_attention(model):
            for column in range(max_new_tokens):
                record(tokens, cache, chosen, stops, pad_id)
                if column + 1 == max_new_tokens:
                    break
                if (column + 1) % check_every == 0:  # the loop's one question to the device in check_every steps
                    live = (~cache.finished.view(cache.prompts, samples).all(1)).tolist()
                    if not any(live):
                        break
                    if (size := min(size for size in buckets if size >= sum(live))) < cache.prompts:
                        kept = torch.tensor(prompts_to_keep(live, size), device=input_ids.device)
                        chosen = chosen.view(cache.prompts, samples)[kept].reshape(-1)
                        cache.compact(kept)
                cache.seen = min(max_new_tokens, -(-(column + 1) // SEEN_BLOCK) * SEEN_BLOCK)
                logits = step(model, chosen, cache)
                cache.column.add_(1)
                chosen = choose(logits, cache.origin, cache.column)
    return tokens[:, :generated_width(tokens, stops)]
