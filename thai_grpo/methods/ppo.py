"""PPO for language models (Ouyang et al. 2022; Huang et al. 2024, "The N+ implementation details of RLHF with PPO"):
our own compact trainer after TRL 1.12.0's ``PPOTrainer`` (TRL 1.16 has none). Four models (``MODELS_IN_MEMORY``):
the policy, GRPO's KL reference, the frozen reward model (or the code rewards for ``score: verifier``) and the value
model (initialised from the reward model, trained).

One step = one rollout batch of B prompts, one completion y_i each, sampled at GRPO's temperature T and
completion budget; T_i = the completion's real tokens (up to and including its first stop token):

    score        s_i = RM(x_i, y_i) read at the last real token of y_i (index T_i - 1)
                       [verifier: s_i = sum of the code rewards of y_i], minus ``missing_eos_penalty`` if y_i has no EOS
    KL per token k1_t = log pi_old(y_t | x, y_<t) - log pi_ref(y_t | x, y_<t)   (logits divided by T, as sampled)
    reward       r_t = -kl_coef * k1_t  + [t = T_i - 1] * s_i        (t < T_i; nothing beyond)
    value        V_t = value head on the hidden state before y_t;  V_{T_i} = 0 (the episode ends)
    GAE          delta_t = r_t + gamma V_{t+1} - V_t;   A_t = delta_t + gamma lam A_{t+1};   R_t = A_t + V_t
    whitening    A <- (A - mean(A)) / sqrt(var(A) + 1e-8) over the batch's real tokens (the rewards are not whitened)
    then ``num_ppo_epochs`` passes over ``num_mini_batches`` shuffled minibatches, each one optimizer step on
    ratio_t = exp(log pi_theta - log pi_old):
    L_pi = mean_t max(-A_t ratio_t, -A_t clip(ratio_t, 1 - cliprange, 1 + cliprange))
    L_V  = 0.5 mean_t max((V'_t - R_t)^2, (clip(V'_t, V_t - cliprange_value, V_t + cliprange_value) - R_t)^2)
    loss = L_pi + vf_coef L_V;  gradient norm clipped at ``max_grad_norm``; AdamW (policy and value parameter groups,
    weight decay 0), the learning rate decayed linearly to 0 over the rollout batches; mean_t: over real tokens.

Departures from TRL 1.12: the score sits on the completion's last real token (TRL put it one slot past the EOS, where
it reached the EOS only through gamma * lam: TRL issues #1893 and #3750); the reward model scores the exact token ids
the policy generated; gradients are clipped; each step's randomness is seeded from (seed, step), so a resumed run
redoes the next step exactly. On a GPU frozen weights are 16-bit and every pass runs under autocast. Each pass is
split into chunks of rows (``pass_rows``), which changes no update.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from thai_grpo.core.references import KL_REFERENCES
from thai_grpo.methods.settings import PPOSettings, ppo_settings
from thai_grpo.methods.reward_model import fresh_reward_model, last_token_scores, load_reward_base, token_scores
from thai_grpo.methods.recorder import (accuracy, rollout_lines, think_shares, total_rewards, update_counts,
                                       update_record)
from thai_grpo.methods.step_replay import MAX_REDOS, scaler_skipped

STATE_FILE = "state.pt"  # a PPO checkpoint: trainable weights, optimizer, loss scale, step
MODELS_IN_MEMORY = {"policy": "base + LoRA from the SFT adapter (trained)",
                    "reference": KL_REFERENCES["sft"]["ppo_model"],
                    "reward": "sequence-classification base + the reward model's LoRA and score head (frozen; merged "
                              "into the base where that keeps them: float32)",
                    "value": "sequence-classification base + a copy of the reward model's LoRA and score head "
                             "(trained)"}


# ----------------------------------------------------------------------------------------- pure pieces (torch)
def completion_mask(lengths, width: int):
    """mask[i, t] = t < lengths[i]: the real tokens of each completion (up to and including its EOS)."""
    import torch

    lengths = torch.as_tensor(lengths)
    return torch.arange(width, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


def masked_mean(values, mask):
    return (values * mask).sum() / mask.sum()


def masked_whiten(values, mask, eps: float = 1e-8):
    """(x - mean) / sqrt(var + eps) over the real tokens (unbiased var, as TRL's masked_whiten); 0 elsewhere."""
    import torch

    mask = mask.to(values.dtype)
    mean = masked_mean(values, mask)
    count = mask.sum()
    var = masked_mean((values - mean) ** 2, mask) * count / (count - 1)
    return torch.where(mask.bool(), (values - mean) * torch.rsqrt(var + eps), torch.zeros_like(values))


def scores_with_penalty(scores, has_eos, penalty: float | None):
    """The score minus ``penalty`` for each completion that never produced a stop token (cut at the budget)."""
    import torch

    scores = torch.as_tensor(scores, dtype=torch.float32).clone()
    if penalty is not None:
        scores[~torch.as_tensor(has_eos, dtype=torch.bool, device=scores.device)] -= penalty
    return scores


def per_token_rewards(logprobs, ref_logprobs, lengths, scores, kl_coef: float):
    """(r_t, k1_t) of the module docstring, zeros beyond each completion."""
    import torch

    lengths = torch.as_tensor(lengths, device=logprobs.device)
    mask = completion_mask(lengths, logprobs.shape[1])
    k1 = torch.where(mask, logprobs - ref_logprobs, torch.zeros_like(logprobs))
    rewards = -kl_coef * k1
    rows = torch.arange(logprobs.shape[0], device=logprobs.device)
    rewards[rows, lengths - 1] += torch.as_tensor(scores, dtype=rewards.dtype, device=logprobs.device)
    return rewards, k1


def gae(rewards, values, mask, gamma: float, lam: float):
    """Generalised advantage estimation, V = 0 beyond the last real token; (advantages, returns = A + V)."""
    import torch

    mask = mask.to(rewards.dtype)
    values = values * mask
    advantages = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0], dtype=rewards.dtype, device=rewards.device)
    for t in reversed(range(rewards.shape[1])):
        next_value = values[:, t + 1] if t + 1 < rewards.shape[1] else torch.zeros_like(running)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = (delta + gamma * lam * running) * mask[:, t]
        advantages[:, t] = running
    return advantages, (advantages + values) * mask


def policy_loss(new_logprobs, old_logprobs, advantages, mask, cliprange: float):
    """PPO's clipped surrogate, mean over real tokens; (loss, share of tokens where the clip binds, approx KL)."""
    import torch

    ratio = torch.exp(new_logprobs - old_logprobs)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange)
    loss = masked_mean(torch.maximum(unclipped, clipped), mask)
    clip_fraction = masked_mean((clipped > unclipped).float(), mask)
    approx_kl = 0.5 * masked_mean((new_logprobs - old_logprobs) ** 2, mask)
    return loss, clip_fraction.detach(), approx_kl.detach()


def value_loss(new_values, old_values, returns, mask, cliprange_value: float):
    """0.5 * mean over real tokens of max((V' - R)^2, (clip(V', V - c, V + c) - R)^2); (loss, clip share)."""
    import torch

    clipped_values = torch.clamp(new_values, old_values - cliprange_value, old_values + cliprange_value)
    unclipped_loss = (new_values - returns) ** 2
    clipped_loss = (clipped_values - returns) ** 2
    loss = 0.5 * masked_mean(torch.maximum(unclipped_loss, clipped_loss), mask)
    return loss, masked_mean((clipped_loss > unclipped_loss).float(), mask).detach()


def explained_variance(values, returns, mask) -> float:
    """1 - Var(R - V) / Var(R) over the real tokens: 1 = V predicts the returns, <= 0 = no better than their mean."""
    mask = mask.bool()
    v, r = values[mask].double(), returns[mask].double()
    var = r.var(unbiased=False)
    return float(1.0 - (r - v).var(unbiased=False) / var) if var > 0 else float("nan")


def step_rng(seed: int, step: int, *parts: int) -> np.random.Generator:
    """One step's generator (``parts`` tell its draws apart): the same whether or not the run was resumed."""
    return np.random.default_rng([seed, step, *parts])


def prompt_batch(num_rows: int, batch_size: int, step: int, seed: int) -> list[int]:
    """Row indices of step ``step`` (1-based): seeded passes over the rows, as a shuffling DataLoader's."""
    start = (step - 1) * batch_size
    return [int(np.random.default_rng([seed, epoch]).permutation(num_rows)[offset])
            for epoch, offset in (divmod(position, num_rows) for position in range(start, start + batch_size))]


# ----------------------------------------------------------------------------------------- models
def sequence_logprobs(model, input_ids, attention_mask, prompt_width: int, temperature: float, with_entropy=False):
    """log pi(y_t | .) of the completion tokens (logits / temperature, as sampled); with the per-token entropy."""
    import torch

    positions = (attention_mask.cumsum(1) - 1).clamp(min=0)
    completion = input_ids.shape[1] - prompt_width  # the LM head runs on the positions that score a completion token
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                   logits_to_keep=completion + 1).logits
    logits = logits[:, :-1].float() / temperature
    logp = torch.log_softmax(logits, dim=-1)
    chosen = logp.gather(-1, input_ids[:, prompt_width:].unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return chosen
    with torch.no_grad():  # a metric, never in the loss: no vocabulary-sized tensor kept for the backward pass
        return chosen, -(logp.exp() * logp).sum(-1)


def by_chunks(function, rows: int, per_chunk: int, pad_id: int = 0):
    """``function(rows_slice)`` over chunks of ``per_chunk`` rows, right-padded with ``pad_id`` and concatenated."""
    import torch

    outputs = [function(slice(start, start + per_chunk)) for start in range(0, rows, per_chunk)]
    width = max(output.shape[1] for output in outputs)
    return torch.cat([torch.nn.functional.pad(output, (0, width - output.shape[1]), value=pad_id)
                      for output in outputs])


def generate_by_chunks(policy, encoded, config, per_chunk: int, pad_id: int, seeds: list[int]):
    """Rollouts ``per_chunk`` prompts at a time; row i samples from ``seeds[i]``, so the chunk size changes none."""
    from thai_grpo.models.sampling import sample_continuations

    return by_chunks(lambda part: sample_continuations(policy, encoded["input_ids"][part],
                                                       encoded["attention_mask"][part], config, seeds[part]),
                     encoded["input_ids"].shape[0], per_chunk, pad_id)


def fresh_value_model(base_dir: str | Path, lora: dict | None, dtype: str = "float32"):
    """A value model without a reward model to start from: a fresh LoRA and a zeroed score head (float32): V = 0."""
    import torch

    from thai_grpo.models.upcast import upcast_trainable

    model = upcast_trainable(fresh_reward_model(base_dir, lora, dtype))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "score" in name:
                parameter.zero_()
    return model


def load_value_model(base_dir: str | Path, reward_dir: str | Path, trainable: bool, merged: bool = False,
                     dtype: str = "float32"):
    """The reward model (base in ``dtype``, its LoRA and score head float32 when trainable)."""
    from peft import PeftModel

    from thai_grpo.models.upcast import upcast_trainable

    model = PeftModel.from_pretrained(load_reward_base(base_dir, dtype), str(reward_dir),
                                      is_trainable=trainable and not merged)
    return model.merge_and_unload() if merged else upcast_trainable(model)


def autocast_like(model):
    """Autocast to the dtype of ``model``'s 16-bit frozen weights, on their device; none for float32."""
    import contextlib

    import torch

    frozen = next((p for p in model.parameters() if not p.requires_grad), None)
    if frozen is None or frozen.dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(frozen.device.type, dtype=frozen.dtype)


def grad_scaler(model):
    """A ``GradScaler`` on the frozen weights' device, enabled only for float16 (whose gradients underflow)."""
    import torch

    frozen = next(p for p in model.parameters() if not p.requires_grad)
    return torch.amp.GradScaler(frozen.device.type, enabled=frozen.dtype == torch.float16)


def reference_model(base_dir: str | Path, adapter_dir: str | Path, reference: str, dtype: str):
    """PPO's frozen KL reference, GRPO's in the same config: ``sft`` = the SFT adapter on a copy of the base (merged
    where ``dtype`` keeps it), ``base`` = a copy of the bare base (GRPO's policy with its adapter disabled)."""
    from thai_grpo.models.frozen import merge_keeps_update
    from thai_grpo.models.loading import load_policy

    if reference not in KL_REFERENCES:
        raise ValueError(f"grpo.reference={reference!r}: use one of {', '.join(KL_REFERENCES)}")
    adapter = adapter_dir if reference == "sft" else None
    return load_policy(base_dir, adapter, merged=adapter is not None and merge_keeps_update(dtype), dtype=dtype).eval()


def load_models(base_dir: str | Path, adapter_dir: str | Path, reward_dir: str | Path | None, score: str,
                reference: str = "sft", dtype: str = "auto") -> dict:
    """PPO's models on this job's device, dropout off: policy, reference, value and (when it scores) reward model;
    frozen weights in ``dtype`` (``auto``: 16 bits on a GPU), trained ones in float32."""
    from trl.trainer.utils import disable_dropout_in_model

    from thai_grpo.jobs.devices import job_device
    from thai_grpo.models.frozen import merge_keeps_update
    from thai_grpo.models.loading import load_policy, resolved_dtype_name

    frozen = resolved_dtype_name(dtype)
    models = {"policy": load_policy(base_dir, adapter_dir, trainable=True, dtype=frozen),
              "reference": reference_model(base_dir, adapter_dir, reference, frozen)}
    if reward_dir is not None:
        models["value"] = load_value_model(base_dir, reward_dir, trainable=True, dtype=frozen)
        if score == "reward_model":  # merged where that keeps its LoRA (float32), as its accuracy stage loads it
            models["reward"] = load_value_model(base_dir, reward_dir, trainable=False,
                                                merged=merge_keeps_update(frozen), dtype=frozen).eval()
    else:  # the verifier scores: no reward model to start from, so a fresh LoRA and a zero score head (V = 0)
        sft = json.loads((Path(adapter_dir) / "adapter_config.json").read_text())
        models["value"] = fresh_value_model(base_dir, {key: sft[key] for key in ("r", "lora_alpha", "target_modules")},
                                            dtype=frozen)
    models = {name: model.to(job_device()) for name, model in models.items()}
    for model in models.values():  # a hub adapter's lora_dropout would make the first minibatch's ratio != 1
        disable_dropout_in_model(model)
    return models


# ----------------------------------------------------------------------------------------- the loop
def _trainable_state(model) -> dict:
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def _load_trainable(model, state: dict) -> None:
    import torch

    params = dict(model.named_parameters())
    mismatched = sorted(set(state) ^ {name for name, p in params.items() if p.requires_grad})
    if mismatched:
        raise RuntimeError(f"PPO checkpoint does not match the model ({mismatched[:3]}...): delete the checkpoint "
                           "folder and rerun")
    with torch.no_grad():
        for name, tensor in state.items():
            params[name].copy_(tensor)


def save_checkpoint(checkpoint_dir: str | Path, step: int, state: dict, keep: int = 2) -> None:
    """checkpoint-<step>/: ``state`` in ``STATE_FILE``, then ``trainer_state.json``, which marks it complete as the
    Trainer's does. Only the last ``keep`` are kept."""
    import shutil

    import torch

    from thai_grpo.core.io import atomic_directory, write_json

    checkpoint_dir = Path(checkpoint_dir)
    with atomic_directory(checkpoint_dir / f"checkpoint-{step}") as tmp:
        torch.save(state, tmp / STATE_FILE)
        write_json(tmp / "trainer_state.json", {"global_step": step})
    done = sorted((int(p.name.split("-")[1]), p) for p in checkpoint_dir.glob("checkpoint-*")
                  if p.name.split("-")[1].isdigit())
    for _, old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def checkpoint_state(step: int, models: dict, optimizer, scaler) -> dict:
    """What a PPO checkpoint holds: trainable weights, optimizer, loss scale, step."""
    state = {"policy": _trainable_state(models["policy"]), "value": _trainable_state(models["value"]),
             "optimizer": optimizer.state_dict(), "step": step}
    return {**state, "scaler": scaler.state_dict()} if scaler.is_enabled() else state


def restore(checkpoint: str | Path, models: dict, optimizer, scaler) -> int:
    """Load a ``save_checkpoint`` folder into the models, optimizer and scaler; returns its step."""
    import torch

    state = torch.load(Path(checkpoint) / STATE_FILE, weights_only=False,
                       map_location=next(models["policy"].parameters()).device)
    _load_trainable(models["policy"], state["policy"])
    _load_trainable(models["value"], state["value"])
    optimizer.load_state_dict(state["optimizer"])
    if "scaler" in state:
        scaler.load_state_dict(state["scaler"])
    return int(state["step"])


def pass_rows(models: dict, settings: PPOSettings, prompt: int) -> dict:
    """Rows per chunk of each pass (rollouts, log-probs, values, update) for prompts of ``prompt`` tokens, within
    ``chunk_floats`` or, for ``auto``, the card's memory free at the job's start (``memory_stages.ppo_pass_rows``); on
    CUDA the update checkpoints its activations where that makes its chunks larger."""
    from thai_grpo.jobs.devices import job_device
    from thai_grpo.jobs.memory_plan import Lora, Shape
    from thai_grpo.jobs.memory_stages import ppo_pass_rows, sizing_gib

    def lora_of(model) -> Lora:  # the adapter's, dropout off
        config = model.peft_config["default"]
        return Lora(r=config.r, target_modules=tuple(sorted(config.target_modules)), lora_dropout=0.0)

    device = job_device()
    return ppo_pass_rows(Shape.from_config(models["policy"].config), lora_of(models["policy"]),
                         lora_of(models["value"]), dataclasses.asdict(settings), settings.max_completion_length,
                         sizing_gib(device), prompt=prompt, may_checkpoint=str(device).startswith("cuda"))


def checkpoint_activations(models: dict, on: bool) -> None:
    """Activation checkpointing (non-reentrant) in the trained models, or not: the same gradients, less memory.
    transformers checkpoints a layer in training mode only: set on every layer (dropout is off: no number changes)."""
    for name in ("policy", "value"):
        if on:
            models[name].activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            models[name].train()
        elif models[name].is_activation_checkpointing:
            models[name].activation_checkpointing_disable()


def _rollout(step: int, settings: PPOSettings, seed: int, models: dict, tokenizer, rows, system_prompt, reward_names,
             stop_ids, chat_template_kwargs, sampler=None) -> dict:
    """One step's batch: ids, masks, old log-probs, values, whitened advantages, returns, and what the metrics need.
    ``sampler``: a ``MergedCopy`` of the policy to sample from, or None."""
    import torch

    from thai_grpo.core.rewards import reward_functions
    from thai_grpo.models.sampling import completion_length, encode_prompts, generation_config, row_seeds

    batch = [rows[i] for i in prompt_batch(len(rows), settings.batch_size, step, seed)]
    policy = models["policy"]
    encoded = encode_prompts(tokenizer, [r["question"] for r in batch], system_prompt, chat_template_kwargs)
    encoded = encoded.to(policy.device)
    width = encoded["input_ids"].shape[1]
    rows = pass_rows(models, settings, width)
    if settings.chunk_floats == "auto":
        print(f"PPO step {step}: rows per chunk {json.dumps(rows)}", flush=True)
    config = generation_config(tokenizer, stop_ids, 1, settings.max_completion_length, settings.temperature)
    sampling_seed = int(step_rng(seed, step, 0).integers(2**31))
    torch.manual_seed(sampling_seed)
    with torch.no_grad(), autocast_like(policy):
        policy.eval()
        output = generate_by_chunks(sampler.refresh() if sampler else policy, encoded, config, rows["generate"],
                                    tokenizer.pad_token_id, row_seeds(sampling_seed, range(len(batch)), 1))
        policy.train()
    completion = output[:, width:]
    counted = zip(*(completion_length(row.tolist(), stop_ids) for row in completion))  # (lengths, stopped)
    lengths, has_eos = (torch.tensor(column, device=completion.device) for column in counted)
    mask = completion_mask(lengths, completion.shape[1])
    completion = torch.where(mask, completion, torch.full_like(completion, tokenizer.pad_token_id))
    ids = torch.cat([encoded["input_ids"], completion], 1)
    attention = torch.cat([encoded["attention_mask"], mask.long()], 1)
    texts = [tokenizer.decode(row[:n].tolist(), skip_special_tokens=True) for row, n in zip(completion, lengths)]
    answers = [row["answer"] for row in batch]  # GRPO's reward functions, by name (format_checked included)
    code = {name: [float(v) for v in function(prompts=None, completions=texts, answer=answers)]
            for name, function in zip(reward_names, reward_functions(reward_names))}

    def logprobs_of(model):
        return by_chunks(lambda part: sequence_logprobs(model, ids[part], attention[part], width,
                                                        settings.temperature), len(batch), rows["logprobs"])

    with torch.no_grad(), autocast_like(policy):  # the update's autocast: the first minibatch's ratio is 1
        logprobs = logprobs_of(policy)
        ref_logprobs = logprobs_of(models["reference"])
        values = by_chunks(lambda part: token_scores(models["value"], ids[part], attention[part]),
                           len(batch), rows["value"])[:, width - 1:-1] * mask
        if settings.score == "verifier":
            raw = torch.tensor(np.sum([code[name] for name in reward_names], axis=0), dtype=torch.float32,
                               device=completion.device)
        else:
            raw = last_token_scores(models["reward"], ids, attention, width, lengths)
    scores = scores_with_penalty(raw, has_eos, settings.missing_eos_penalty)
    rewards, k1 = per_token_rewards(logprobs, ref_logprobs, lengths, scores, settings.kl_coef)
    advantages, returns = gae(rewards, values, mask, settings.gamma, settings.lam)
    return dict(ids=ids, attention=attention, width=width, rows=rows, mask=mask, lengths=lengths, has_eos=has_eos,
                logprobs=logprobs, values=values, advantages=masked_whiten(advantages, mask), returns=returns,
                raw_scores=raw, scores=scores, k1=k1, texts=texts, code=code, prompt_ids=[r.get("id") for r in batch])


def _chunk_losses(rollout: dict, index, settings: PPOSettings, models: dict) -> dict:
    """The losses and statistics of the rows ``index`` of a minibatch (each a mean over their real tokens)."""
    width, m = rollout["width"], rollout["mask"][index]
    ids, attention = rollout["ids"][index], rollout["attention"][index]
    new_logprobs, entropy = sequence_logprobs(models["policy"], ids, attention, width, settings.temperature,
                                              with_entropy=True)
    new_values = token_scores(models["value"], ids, attention)[:, width - 1:-1]
    pg_loss, clip_fraction, approx_kl = policy_loss(new_logprobs, rollout["logprobs"][index],
                                                    rollout["advantages"][index], m, settings.cliprange)
    vf_loss, vf_clip = value_loss(new_values, rollout["values"][index], rollout["returns"][index], m,
                                  settings.cliprange_value)
    return {"loss": pg_loss + settings.vf_coef * vf_loss, "policy_loss": pg_loss, "value_loss": vf_loss,
            "clip_fraction": clip_fraction, "value_clip_fraction": vf_clip, "approx_kl": approx_kl,
            "entropy": masked_mean(entropy.detach(), m)}


def _update(rollout: dict, step: int, settings: PPOSettings, seed: int, models: dict, optimizer, params,
            scaler=None) -> tuple[dict, list[dict]]:
    """``num_ppo_epochs`` passes over shuffled minibatches, one optimizer step each (a minibatch's chunks weighted by
    their share of real tokens: one pass's gradient); (mean statistics, one ``update_record`` per update)."""
    import torch

    scaler = scaler or grad_scaler(models["policy"])
    updates = []
    keys = ("policy_loss", "value_loss", "clip_fraction", "value_clip_fraction", "approx_kl", "entropy")
    stats = {key: [] for key in (*keys, "grad_norm")}
    size = settings.batch_size // settings.num_mini_batches
    mask = rollout["mask"]
    rows = rollout.get("rows") or pass_rows(models, settings, rollout["width"])  # the rollout's, as it was sized
    per_chunk = rows["update"]
    checkpoint_activations(models, rows["checkpointing"])
    for epoch in range(settings.num_ppo_epochs):
        order = step_rng(seed, step, 1, epoch).permutation(settings.batch_size)
        for start in range(0, settings.batch_size, size):
            index = torch.as_tensor(order[start:start + size], device=mask.device)
            total = float(mask[index].sum())
            parts = [(index[i:i + per_chunk], float(mask[index[i:i + per_chunk]].sum()) / total)
                     for i in range(0, size, per_chunk)]
            for redos in range(MAX_REDOS + 1):  # a step the float16 scaler skipped, again at its lowered scale
                optimizer.zero_grad()
                sums = dict.fromkeys(keys, 0.0)
                for part, share in parts:
                    with autocast_like(models["policy"]):
                        losses = _chunk_losses(rollout, part, settings, models)
                    scaler.scale(losses["loss"] * share).backward()
                    for key in keys:
                        sums[key] += float(losses[key].detach()) * share
                scaler.unscale_(optimizer)
                grad_norm = torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm)
                scale_before = scaler.get_scale() if scaler.is_enabled() else 1.0
                scaler.step(optimizer)
                scaler.update()
                if not (skipped := scaler_skipped(scale_before, scaler)):
                    break
            updates.append(update_record(step, skipped, math.isfinite(float(grad_norm)), redos))
            for key in keys:
                stats[key].append(sums[key])
            stats["grad_norm"].append(float(grad_norm))
    return {key: float(np.mean(values)) for key, values in stats.items()}, updates


def learning_rate_factor(step: int, settings: PPOSettings) -> float:
    """The learning rate's share of its peak in step ``step`` (1-based): TRL's linear decay, or 1 for constant; a
    function of the step alone, so a resumed run needs no scheduler state."""
    if settings.lr_scheduler_type == "constant":
        return 1.0
    return max(0.0, (settings.max_steps - (step - 1)) / settings.max_steps)


def step_record(step: int, rollout: dict, update: dict, settings: PPOSettings, updates: list[dict] = ()) -> dict:
    """One line of step_metrics.jsonl: GRPO's keys where they mean the same, plus PPO's own."""
    mask, lengths = rollout["mask"], rollout["lengths"]
    k1_sums = rollout["k1"].sum(1)
    record = {"step": step, "reward_mean": float(total_rewards(rollout["code"]).mean()),
              "rewards": {name: float(np.mean(v)) for name, v in rollout["code"].items()},
              "score_mean": float(rollout["scores"].mean()), "raw_score_mean": float(rollout["raw_scores"].mean()),
              "rlhf_reward": float((rollout["scores"] - settings.kl_coef * k1_sums).mean()),
              "kl": float(masked_mean(rollout["k1"], mask)), "kl_sum": float(k1_sums.mean()),
              "explained_variance": explained_variance(rollout["values"], rollout["returns"], mask),
              "value_mean": float(masked_mean(rollout["values"], mask)),
              "return_mean": float(masked_mean(rollout["returns"], mask)),
              "completion_length_mean": float(lengths.float().mean()), "generated_tokens": int(lengths.sum()),
              "num_completions": len(rollout["texts"]), "clipped_ratio": float((~rollout["has_eos"]).float().mean()),
              **think_shares(rollout["code"], rollout["texts"]), **update, "clip_ratio": update["clip_fraction"],
              "loss": update["policy_loss"] + settings.vf_coef * update["value_loss"], **update_counts(list(updates))}
    return {**record, **accuracy(rollout["code"])}


def rollout_advantages(rollout: dict) -> list[float]:
    """Each completion's advantage for its rollout line: the mean of its whitened per-token advantages (6 decimals)."""
    mask = rollout["mask"].float()
    return [round(a, 6) for a in ((rollout["advantages"] * mask).sum(1) / mask.sum(1).clamp(min=1)).tolist()]


def train(spec) -> dict:
    """Run PPO from the SFT adapter (resuming from the last complete checkpoint); save the policy adapter, the value
    model beside it and the rollouts; return the run's record."""
    import torch

    from thai_grpo.core.io import atomic_directory, progress, read_appended_jsonl, write_jsonl
    from thai_grpo.methods.recorder import (ROLLOUTS_FILE, UPDATES_FILE, append_lines, check_lost_updates,
                                           read_step_metrics, start_step_log)
    from thai_grpo.models.loading import count_parameters, load_tokenizer, weights_dtype
    from thai_grpo.models.sampling import stop_token_ids
    from thai_grpo.models.training import clear_checkpoints, seed_everything

    grpo_args, seed, rows = spec.plan["grpo_args"], spec.seed, spec.train_rows
    settings = ppo_settings(grpo_args, spec.plan["ppo"])
    if settings.score == "reward_model" and spec.reward_dir is None:
        raise ValueError("PPO with score: reward_model needs the reward model folder (rule reward_model)")
    checkpoint_dir = Path(spec.checkpoint_dir)
    metrics_path, resume_from = start_step_log(checkpoint_dir)
    updates_path, rollouts_path = checkpoint_dir / UPDATES_FILE, checkpoint_dir / ROLLOUTS_FILE
    seed_everything(seed)
    tokenizer = load_tokenizer(spec.base_dir)
    reference = grpo_args["reference"]
    models = load_models(spec.base_dir, spec.adapter_dir, spec.reward_dir, settings.score, reference, spec.dtype)
    policy_params = [p for p in models["policy"].parameters() if p.requires_grad]
    value_params = [p for p in models["value"].parameters() if p.requires_grad]
    value_rate = settings.value_learning_rate or settings.learning_rate
    optimizer = torch.optim.AdamW([{"params": policy_params, "lr": settings.learning_rate},
                                   {"params": value_params, "lr": value_rate}], weight_decay=settings.weight_decay)
    peak_rates = [group["lr"] for group in optimizer.param_groups]
    scaler = grad_scaler(models["policy"])
    start = restore(resume_from, models, optimizer, scaler) if resume_from else 0
    stop_ids = stop_token_ids(models["policy"], tokenizer)
    sampler = None
    if models["policy"].device.type == "cpu":  # rollouts from a merged copy: the same function, fewer products
        from thai_grpo.models.cpu.merged_sampler import MergedCopy, can_merge_copy

        sampler = MergedCopy(models["policy"]) if can_merge_copy(models["policy"]) else None
    tracker = start_tracker(spec, settings)
    total_updates = settings.max_steps * settings.num_ppo_epochs * settings.num_mini_batches
    for step in range(start + 1, settings.max_steps + 1):
        for group, peak in zip(optimizer.param_groups, peak_rates):
            group["lr"] = peak * learning_rate_factor(step, settings)
        rollout = _rollout(step, settings, seed, models, tokenizer, rows, spec.system_prompt,
                           spec.plan["rewards"], stop_ids, grpo_args.get("chat_template_kwargs") or {}, sampler)
        update, updates = _update(rollout, step, settings, seed, models, optimizer, policy_params + value_params,
                                  scaler)
        record = step_record(step, rollout, update, settings, updates)
        append_lines(updates_path, updates)
        append_lines(rollouts_path, rollout_lines(step, rollout["prompt_ids"], rollout["texts"], rollout["code"],
                                                  rollout_advantages(rollout), rollout["scores"]))
        append_lines(metrics_path, [record])
        if tracker is not None:
            tracker.log({k: v for k, v in record.items() if isinstance(v, (int, float))}, step=step)
        print(json.dumps({k: v for k, v in record.items() if not isinstance(v, dict)}), flush=True)
        progress(f"{checkpoint_dir.name}: step {step}/{settings.max_steps} (score {record['score_mean']:.3f}, "
                 f"value loss {record['value_loss']:.4f}, explained variance {record['explained_variance']:.2f})")
        check_lost_updates(spec.run, read_appended_jsonl(updates_path), total_updates,
                           spec.training["max_lost_update_share"])
        if step % settings.save_steps == 0 and step < settings.max_steps:
            save_checkpoint(checkpoint_dir, step, checkpoint_state(step, models, optimizer, scaler))
    if tracker is not None:
        tracker.end_training()

    with atomic_directory(spec.out_dir) as tmp:
        models["policy"].save_pretrained(tmp, safe_serialization=True)
        models["value"].save_pretrained(tmp / "value_model", safe_serialization=True)
    if spec.rollouts is not None:
        write_jsonl(spec.rollouts, read_appended_jsonl(rollouts_path))
    policy_count, value_count = count_parameters(models["policy"]), count_parameters(models["value"])
    result = {"method": "ppo", "kl_reference": KL_REFERENCES[reference]["ppo"], "args": dataclasses.asdict(settings),
              "score": settings.score, "steps": read_step_metrics(metrics_path),
              "parameters": {"total": policy_count["total"] + value_count["total"],
                             "trainable": policy_count["trainable"] + value_count["trainable"],
                             "policy_trainable": policy_count["trainable"],
                             "value_trainable": value_count["trainable"]},
              "models_in_memory": {**{k: MODELS_IN_MEMORY[k] for k in models},
                                   "reference": KL_REFERENCES[reference]["ppo_model"]},
              "weights_dtype": weights_dtype(models["policy"]),
              "optimizer_updates": total_updates, **update_counts(read_appended_jsonl(updates_path))}
    clear_checkpoints(checkpoint_dir)
    return result


def start_tracker(spec, settings: PPOSettings):
    """The accelerate tracker of ``training.report_to`` for PPO's metrics; None for ``none``."""
    report_to = spec.training["report_to"]
    if report_to == "none":
        return None
    from accelerate import Accelerator

    from thai_grpo.models.training import TRACKING_PROJECT, tracking_dir

    accelerator = Accelerator(log_with=report_to, project_dir=str(tracking_dir(spec.checkpoint_dir)))
    accelerator.init_trackers(TRACKING_PROJECT, config=dataclasses.asdict(settings),
                              init_kwargs={report_to: {"name": Path(spec.checkpoint_dir).name}}
                              if report_to in ("wandb", "trackio") else {})
    return accelerator
