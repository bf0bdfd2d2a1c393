"""What each KL in the run is measured against (the config's ``grpo.reference``), its words, and GRPO's per-token
estimator of it (k3), which the loss and the KL study share.

GRPO's and PPO's training KL is to ``grpo.reference``; the k1-vs-k3 stage always measures KL(GRPO || SFT).
"""

from __future__ import annotations

# The one table of KL references (``grpo.reference``): what the KL is to (``name``), how TRL computes it for GRPO and
# RLOO (``trl``), the same reference in PPO (``ppo``) and the frozen model PPO loads for it (``ppo_model``).
PPO_KL = "PPO subtracts kl_coef x k1 per token from the reward"
KL_REFERENCES = {
    "sft": {"name": "the SFT policy",
            "trl": "frozen copy of the SFT adapter (TRL's 'ref' adapter): the KL is to the SFT policy",
            "ppo": f"the SFT policy, frozen (a merged copy of the SFT adapter), as GRPO's grpo.reference: sft; {PPO_KL}",
            "ppo_model": "base with the SFT adapter merged (frozen)"},
    "base": {"name": "the base model (adapter disabled)",
             "trl": "the base model with the adapter disabled: the KL is to the base, as in the chapter",
             "ppo": f"the base model, frozen (a copy without the adapter), as GRPO's grpo.reference: base; {PPO_KL}",
             "ppo_model": "the bare base (frozen)"},
}
REFERENCE_NAMES = {key: reference["name"] for key, reference in KL_REFERENCES.items()}
NO_KL = "none: beta = 0, no KL term and no reference pass"


def k3(logp, ref_logp):
    """Per-token k3 = (x - 1) - log x with x = pi_ref / pi_theta = exp(ref_logp - logp): >= 0, unbiased for
    KL(pi_theta || pi_ref). Its gradient in log pi_theta is 1 - x, zero where the two policies agree. Torch tensors
    give a tensor; arrays or lists are computed as float64 tensors (the loss's arithmetic) and come back as numpy."""
    import torch

    if not isinstance(logp, torch.Tensor):
        as_tensor = [torch.as_tensor(values, dtype=torch.float64) for values in (logp, ref_logp)]
        return k3(*as_tensor).numpy()
    log_x = ref_logp - logp
    return torch.expm1(log_x) - log_x
