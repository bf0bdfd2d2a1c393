"""The decode loop behind held-out sampling and PPO's rollouts: ``generate``'s tokens, with only the work they need.

Machinery a reader of the algorithm can skip. Unlike ``model.generate``, ``decode`` pre-allocates each layer's
completion keys and values (no copy per step), prefills each prompt once for all its samples (shared-prefix or
"cascade" attention, as in Hydragen: one softmax over the prompt's scores and the row's own, an ``AttentionInterface``
function), and runs the layers on unfinished rows only. The caller's ``choose`` picks each token from the float32
logits ``generate``'s processors see, so the tokens are ``generate``'s. Not transformers' continuous batching: it draws
every row from the global generator, so a row's sample would depend on its batch mates.
"""

from __future__ import annotations

import contextlib
import dataclasses

from thai_grpo.jobs.memory_plan import COMPACT_WHEN_DONE  # the plan's compaction term depends on it
from thai_grpo.models.positions import generation_positions

ATTENTION = "shared_prompt"  # the name the decode steps' attention is registered under (AttentionInterface)


@dataclasses.dataclass
class SharedPromptCache:
    """Keys and values of ``prompts`` prompts held once, and of their ``samples`` completions each, pre-allocated.

    ``prompt_keys[layer]``: [prompts, kv heads, prompt width, head dim]; ``prompt_mask``: [prompts, prompt width], True
    on real tokens; ``keys[layer]``: [prompts x samples, kv heads, budget, head dim], sample s of prompt p in row
    ``p * samples + s``. ``origin``: each buffer row's output row; ``active``: the rows still decoding."""
    prompt_keys: list
    prompt_values: list
    prompt_mask: object
    samples: int
    budget: int
    origin: object
    active: object
    keys: list = dataclasses.field(default_factory=list)
    values: list = dataclasses.field(default_factory=list)
    written: int = 0

    @property
    def prompts(self) -> int:
        return self.prompt_mask.shape[0]

    def active_rows(self):
        """The output rows still decoding, in the buffers' order."""
        return self.origin[self.active]

    def write(self, layer: int, key, value) -> None:
        """This step's key and value ([active rows, kv heads, 1, head dim]) into the active rows' next column."""
        import torch

        if len(self.keys) <= layer:
            rows, shape = self.prompts * self.samples, (key.shape[1], self.budget, key.shape[-1])
            self.keys.append(torch.zeros((rows, *shape), dtype=key.dtype, device=key.device))
            self.values.append(torch.zeros((rows, *shape), dtype=value.dtype, device=value.device))
        self.keys[layer][self.active, :, self.written] = key[:, :, 0]
        self.values[layer][self.active, :, self.written] = value[:, :, 0]

    def leave(self, going) -> None:
        """Keep the active rows where ``going`` is True; compact once ``COMPACT_WHEN_DONE`` of the prompts have none."""
        import torch

        self.active = self.active[going]
        live = torch.zeros(self.prompts, dtype=torch.bool, device=going.device)
        live[self.active // self.samples] = True
        if not going.all() and 1 - live.float().mean() >= COMPACT_WHEN_DONE:
            self.compact(live)

    def compact(self, live) -> None:
        """Only the prompts ``live`` (a mask) and all their buffer rows, copied in order; the rows renumbered. One
        tensor at a time, each list entry replaced before the next is copied: the old tensor is freed as its copy is
        made, so the compaction holds at most one layer's kept rows beside the cache, never a second cache."""
        import torch

        kept = torch.arange(self.prompts * self.samples, device=live.device).view(self.prompts, self.samples)[live]
        kept = kept.reshape(-1)
        renumbered = torch.full((self.prompts * self.samples,), -1, dtype=torch.long, device=live.device)
        renumbered[kept] = torch.arange(len(kept), device=live.device)
        for buffers, rows in ((self.prompt_keys, live), (self.prompt_values, live), (self.keys, kept),
                              (self.values, kept)):
            keep_rows(buffers, rows)
        self.prompt_mask = self.prompt_mask[live]
        self.origin, self.active = self.origin[kept], renumbered[self.active]


def keep_rows(buffers: list, rows) -> None:
    """Each tensor of ``buffers`` replaced, in place in the list and one at a time, by its rows ``rows``."""
    for index in range(len(buffers)):
        buffers[index] = buffers[index][rows]


def shared_prompt_attention(module, query, key, value, attention_mask, scaling: float, dropout: float = 0.0,
                            shared_prompt: SharedPromptCache | None = None, **kwargs):
    """One decode step's attention, ``query`` [active rows, heads, 1, head dim]: eager attention's arithmetic (softmax
    in float32) over each row's prompt, then its completion, without joining their keys."""
    import torch

    cache = shared_prompt
    if cache is None or query.shape[2] != 1 or dropout or kwargs.get("sliding_window"):
        raise ValueError("shared_prompt attention runs decode steps of decoding.decode only (one token per row, no "
                         "dropout, no sliding window)")
    layer, groups = module.layer_idx, module.num_key_value_groups
    cache.write(layer, key, value)
    prompts, samples, kv_heads = cache.prompts, cache.samples, key.shape[1]
    heads, dim, seen = query.shape[1], query.shape[-1], cache.written + 1
    rows = query.new_zeros((prompts * samples, heads, dim))  # every buffer row: those that have stopped read zeros
    rows[cache.active] = query[:, :, 0]
    by_prompt = rows.view(prompts, samples, kv_heads, groups, dim)
    # against the prompt: one product per prompt, its samples' queries side by side; then against the row's completion
    grid = by_prompt.permute(0, 2, 1, 3, 4).reshape(prompts, kv_heads, samples * groups, dim)
    prompt_scores = torch.matmul(grid, cache.prompt_keys[layer].transpose(2, 3))
    prompt_scores = prompt_scores.view(prompts, kv_heads, samples, groups, -1)
    own_keys = cache.keys[layer][:, :, :seen].view(prompts, samples, kv_heads, seen, dim)
    own_scores = torch.matmul(by_prompt, own_keys.transpose(3, 4)).permute(0, 2, 1, 3, 4)
    scores = torch.cat([prompt_scores, own_scores], dim=-1) * scaling
    padding = ~cache.prompt_mask[:, None, None, None, :]
    scores[..., :padding.shape[-1]].masked_fill_(padding, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    prompt_weights, own_weights = weights.split([padding.shape[-1], seen], dim=-1)
    from_prompt = torch.matmul(prompt_weights.reshape(prompts, kv_heads, samples * groups, -1),
                               cache.prompt_values[layer])
    from_prompt = from_prompt.view(prompts, kv_heads, samples, groups, dim).permute(0, 2, 1, 3, 4)
    own_values = cache.values[layer][:, :, :seen].view(prompts, samples, kv_heads, seen, dim)
    output = from_prompt + torch.matmul(own_weights.permute(0, 2, 1, 3, 4), own_values)
    return output.reshape(prompts * samples, heads, dim)[cache.active].unsqueeze(1), None


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

    output = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=generation_positions(attention_mask),
                   cache=DynamicCache(config=model.config), use_cache=True, logits_to_keep=1)
    layers = output.cache.layers
    return (output.logits[:, -1].float(), [layer.keys for layer in layers], [layer.values for layer in layers])


def decode_step(model, tokens, positions, cache: SharedPromptCache):
    """The float32 logits after ``tokens`` (one per active row, at ``positions``), their keys and values written."""
    masks = {layer_type: None for layer_type in set(model.config.layer_types)}  # the attention masks itself
    output = model(input_ids=tokens[:, None], position_ids=positions[:, None], attention_mask=masks, use_cache=False,
                   shared_prompt=cache)
    cache.written += 1
    return output.logits[:, -1].float()


def decode(model, input_ids, attention_mask, samples: int, max_new_tokens: int, stop_ids: list[int], pad_id: int,
           choose):
    """The new tokens of ``samples`` continuations of each left-padded prompt, as ``generate`` returns them: [rows,
    steps], row ``prompt * samples + sample``, ``pad_id`` after its stop token. ``choose(scores, rows)``: the next token
    of output rows ``rows`` from their float32 scores [len(rows), vocabulary]."""
    import torch

    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens}: decode at least one token")
    rows = input_ids.shape[0] * samples
    tokens = torch.full((rows, max_new_tokens), pad_id, dtype=torch.long, device=input_ids.device)
    stops = torch.tensor(stop_ids, device=input_ids.device)
    everyone = torch.arange(rows, device=input_ids.device)
    next_position = attention_mask.long().sum(-1).repeat_interleave(samples)  # per row: its first new token's
    with torch.no_grad():
        logits, prompt_keys, prompt_values = prefill(model, input_ids, attention_mask)
        cache = SharedPromptCache(prompt_keys, prompt_values, attention_mask.bool(), samples, max_new_tokens,
                                  origin=everyone, active=everyone)
        chosen = choose(logits.repeat_interleave(samples, 0), everyone)  # a prompt's samples start from its logits
        with decode_attention(model):
            for step in range(max_new_tokens):
                tokens[cache.active_rows(), step] = chosen
                going = ~torch.isin(chosen, stops)
                if step + 1 == max_new_tokens or not going.any():
                    break
                cache.leave(going)
                rows_now = cache.active_rows()
                logits = decode_step(model, chosen[going], next_position[rows_now] + step, cache)
                chosen = choose(logits, rows_now)
    return tokens[:, :step + 1]

