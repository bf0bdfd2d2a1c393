"""GRPO's objective as the chapter writes it, in small torch functions: the arithmetic TRL's ``GRPOTrainer`` runs.

For a prompt, G completions o_1..o_G with rewards r_1..r_G; every token t of completion i shares its advantage:

    A_i       = (r_i - mean(r)) / (std(r) + eps)                    sample std (ddof = 1), eps = 1e-4
    rho_i,t   = pi_theta(o_i,t | ...) / pi_theta_old(o_i,t | ...)
    surr_i,t  = min(rho_i,t * A_i, clip(rho_i,t, 1 - epsilon, 1 + epsilon) * A_i)
    x_i,t     = pi_ref(o_i,t | ...) / pi_theta(o_i,t | ...),   k3_i,t = (x_i,t - 1) - log x_i,t
    loss      = (1/G) sum_i (1/|o_i|) sum_t [ -surr_i,t + beta * k3_i,t ]

Dr.GRPO (Liu et al. 2025; TRL's ``loss_type: dr_grpo`` with ``scale_rewards: none``) drops the division by std and
replaces 1/|o_i| by 1 / (G * max_completion_length): a long completion's tokens weigh as much as a short one's.
A_i is ``thai_grpo.methods.grpo.group_advantages``. ``tests/test_objective.py`` checks these functions against TRL's
advantages, loss and gradient on a real batch. With TRL's ``num_iterations: 1`` pi_theta_old is pi_theta detached:
rho = 1 in value, only its gradient acts.
"""

from __future__ import annotations

import torch

from thai_grpo.core.references import k3
from thai_grpo.methods.grpo import STD_EPS, group_advantages  # noqa: F401 - A_i, the rule GRPO's records use


def clipped_surrogate(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                      epsilon: float) -> torch.Tensor:
    """Per-token PPO surrogate min(rho * A, clip(rho, 1 - epsilon, 1 + epsilon) * A), rho = exp(logp - old_logp);
    ``advantages`` per completion, shape (B,), shared by its tokens."""
    ratio = torch.exp(logp - old_logp)
    advantages = advantages.unsqueeze(1)
    return torch.min(ratio * advantages, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * advantages)


def completion_token_mean(per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(1/|o_i|) sum_t per_token[i, t] over each completion's own tokens (``mask``); shape (B,). An empty completion
    counts as one token, as in TRL."""
    return (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, beta: float, epsilon: float, loss_type: str = "grpo",
              max_completion_length: int | None = None) -> torch.Tensor:
    """The loss of one batch: -surrogate + beta * k3 per token, then the per-completion token mean averaged over
    completions (``"grpo"``) or Dr.GRPO's token sum / (B * ``max_completion_length``). Per-token tensors are (B, T),
    ``advantages`` (B,)."""
    per_token = -clipped_surrogate(logp, old_logp, advantages, epsilon)
    if beta:
        per_token = per_token + beta * k3(logp, ref_logp)
    if loss_type == "grpo":
        return completion_token_mean(per_token, mask).mean()
    if loss_type == "dr_grpo":
        if not max_completion_length:
            raise ValueError("Dr.GRPO's normaliser needs max_completion_length")
        return (per_token * mask).sum() / (per_token.size(0) * max_completion_length)
    raise ValueError(f"loss_type={loss_type!r}: the chapter's objective is 'grpo' or Dr.GRPO's 'dr_grpo'")
