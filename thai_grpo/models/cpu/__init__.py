"""The CPU speed-ups of GRPO's and RLOO's trainers (imported on a CPU only): each group's prompt computed once
(``shared_prefix``), rollouts from a merged copy of the policy (``merged_sampler``); TRL's numbers up to sum order."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def _shared_prompt_generate(model, merged=None):
    """``model.generate`` replaced while the block runs by ``generate_sharing_prompts`` on ``merged`` (refreshed
    first) when given, else on the policy itself."""
    from thai_grpo.models.cpu.shared_prefix import generate_sharing_prompts

    sampler, generate = (model, model.generate) if merged is None else (merged.refresh(), None)
    model.generate = lambda input_ids, attention_mask, generation_config, **kwargs: generate_sharing_prompts(
        sampler, input_ids, attention_mask, generation_config, generate=generate, **kwargs)
    try:
        yield model
    finally:
        del model.generate  # the class's method again


def shares_prompts_on(device, use_vllm: bool = False) -> bool:
    """Whether ``share_prompts`` replaces TRL's passes on ``device``: on a CPU without vLLM only."""
    import torch

    return torch.device(device).type == "cpu" and not use_vllm


def share_prompts(trainer):
    """A GRPO-family ``trainer`` on a CPU computing each group's prompt once, in the rollouts and every log-prob pass.
    Multimodal or MoE batches, activation checkpointing (it drops the shared prompt's cache) and vLLM take TRL's own
    pass, over the completion positions only."""
    import torch

    from thai_grpo.models.cpu.merged_sampler import MergedCopy, can_merge_copy
    from thai_grpo.models.cpu.shared_prefix import (completion_logprobs_sharing_prompts,
                                                    scoring_labelled_positions_only)

    sharing = shares_prompts_on(trainer.accelerator.device, trainer.use_vllm)
    generate_single_turn, trl_logps = trainer._generate_single_turn, trainer._get_per_token_logps_and_entropies
    policy = trainer.accelerator.unwrap_model(trainer.model)
    merged = MergedCopy(policy) if sharing and can_merge_copy(policy) else None

    def generate_sharing(*args, **kwargs):
        with _shared_prompt_generate(policy, merged):
            return generate_single_turn(*args, **kwargs)

    def logps_sharing(model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False,
                      compute_aux_loss=False, **multimodal):
        if (not sharing or getattr(trainer.args, "activation_checkpointing", False) or compute_aux_loss
                or any(value is not None for value in multimodal.values())):
            with scoring_labelled_positions_only():  # TRL's pass, over the completion positions only
                return trl_logps(model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy,
                                 compute_aux_loss, **multimodal)
        batch_size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):  # TRL's chunks of rows, each sharing its prompts
            ids, mask = input_ids[start:start + batch_size], attention_mask[start:start + batch_size]
            shared = completion_logprobs_sharing_prompts(model, ids, mask, logits_to_keep, compute_entropy,
                                                         trainer.accelerator.autocast)
            if shared is None:
                shared = trl_logps(model, ids, mask, logits_to_keep, compute_entropy=compute_entropy)[:2]
            logps.append(shared[0])
            entropies.append(shared[1])
        return torch.cat(logps), torch.cat(entropies) if compute_entropy else None, None

    trainer._get_per_token_logps_and_entropies = logps_sharing
    if sharing:
        trainer._generate_single_turn = generate_sharing
    return trainer
