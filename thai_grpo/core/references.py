"""What each KL in the run is measured against (the config's ``grpo.reference``), and its words.

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
