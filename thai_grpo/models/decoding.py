"""The decode loop behind held-out sampling and PPO's rollouts: ``generate``'s tokens, with only the work they need.

Machinery: a reader of the algorithm can skip it. ``thai_grpo.models.sampling`` says what is sampled (the prompts, the
budget, the stop tokens, each row's own seed); this module computes it. ``model.generate`` with its default cache does
more than sampling needs: each decode step copies the whole key/value cache (it grows by concatenation), each sample
holds its own copy of its prompt's keys and values, and a row that has produced its stop token keeps running until the
last row stops. ``decode`` runs the model's own forward in a loop that does none of that:

- Pre-allocated: each layer's completion keys and values live in one buffer as long as the budget, written in place
  one column per step. A prompt's keys and values are the prefill's own tensors, kept as they are.
- Prompts held once: the prompt is prefilled once per prompt and its keys and values are read by all its samples.
  Attention splits each row's keys at the end of the prompt (shared-prefix or "cascade" attention: Hydragen, Juravsky
  et al. 2024; FlashInfer's cascade inference): the scores against the prompt are one matrix product per prompt for the
  queries of all its samples, those against the row's own completion one per row, and one softmax runs over both, as
  over the row's whole key sequence. transformers lets a model use such a function (``AttentionInterface``); it is
  used for the decode steps only, the prefill runs the model's own attention.
- Finished rows leave: after a row's stop token the layers and the LM head run on the unfinished rows only. A prompt
  whose samples have all stopped stays in the buffers (its rows are cheap there: attention only) until a quarter of
  the buffers' prompts have, then the buffers are compacted (the remaining rows copied once).

The next token is chosen by the caller (``choose``: greedy, or Gumbel-max from each row's own generator) from the
float32 logits ``generate`` hands its logits processors, so the samples are ``generate``'s: the same weights, positions
and masks, the arithmetic the same up to the order of floating-point sums (tests/test_decoding.py checks the tokens
against ``generate``'s). Why not transformers' own tools: ``StaticCache`` pre-allocates but holds the prompt once per
row and cannot drop a row; continuous batching (``generate_batch``, whose paged cache lets prompts share blocks) draws
every row's token with one ``torch.multinomial`` from the global generator, so a row's sample would depend on what else
is scheduled beside it.
"""

from __future__ import annotations

import contextlib
import dataclasses

from thai_grpo.models.positions import generation_positions

ATTENTION = "shared_prompt"  # the name the decode steps' attention is registered under (AttentionInterface)
COMPACT_WHEN_DONE = 0.25  # compact the buffers once this share of their prompts has no unfinished sample


@dataclasses.dataclass
class SharedPromptCache:
    """Keys and values of ``prompts`` prompts held once, and of their ``samples`` completions each, pre-allocated.

    ``prompt_keys[layer]``: [prompts, kv heads, prompt width, head dim] (the prefill's tensors); ``prompt_mask``:
    [prompts, prompt width], True on real tokens (not left padding); ``keys[layer]``: [prompts x samples, kv heads,
    budget, head dim], the completion of sample s of prompt p in buffer row ``p * samples + s``, allocated at the first
    write. ``origin``: each buffer row's row in the output; ``active``: the buffer rows still decoding; ``written``:
    the completion tokens written so far."""
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
        """Keep decoding the active rows where ``going`` is True; compact the buffers once ``COMPACT_WHEN_DONE`` of
        their prompts have no row left (a finished row of a live prompt stays: its attention rows are cheap)."""
        import torch

        self.active = self.active[going]
        live = torch.zeros(self.prompts, dtype=torch.bool, device=going.device)
        live[self.active // self.samples] = True
        if not going.all() and 1 - live.float().mean() >= COMPACT_WHEN_DONE:
            self.compact(live)

    def compact(self, live) -> None:
        """Only the prompts ``live`` (a mask) and all their buffer rows, copied in order; the rows renumbered."""
        import torch

        kept = torch.arange(self.prompts * self.samples, device=live.device).view(self.prompts, self.samples)[live]
        kept = kept.reshape(-1)
        renumbered = torch.full((self.prompts * self.samples,), -1, dtype=torch.long, device=live.device)
        renumbered[kept] = torch.arange(len(kept), device=live.device)
        self.prompt_keys = [keys[live] for keys in self.prompt_keys]
        self.prompt_values = [values[live] for values in self.prompt_values]
        self.prompt_mask = self.prompt_mask[live]
        self.keys = [keys[kept] for keys in self.keys]
        self.values = [values[kept] for values in self.values]
        self.origin, self.active = self.origin[kept], renumbered[self.active]


def shared_prompt_attention(module, query, key, value, attention_mask, scaling: float, dropout: float = 0.0,
                            shared_prompt: SharedPromptCache | None = None, **kwargs):
    """One decode step's attention for the active rows (``AttentionInterface``'s signature): ``query``
    [active rows, heads, 1, head dim], ``key``/``value`` this step's token's. Eager attention's arithmetic (scores in
    the query's dtype, softmax in float32) over each row's prompt, then its completion, without joining their keys."""
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
    """(float32 logits of each prompt's last position, the prompts' keys and values per layer) from one forward pass
    of the model's own attention, positions numbered as ``generate`` numbers a left-padded batch."""
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
    """The new tokens of ``samples`` continuations of each left-padded prompt (rows ``prompt * samples + sample``), as
    ``generate`` returns them: [rows, steps], a row's tokens after its first stop token ``pad_id``, steps = the most
    any row took (at most ``max_new_tokens``). ``choose(scores, rows)``: the next token of the original rows ``rows``
    from their float32 scores [len(rows), vocabulary]."""
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

