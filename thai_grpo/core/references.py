"""What each KL in the run is measured against, in words computed from the config's ``grpo.reference``.

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


def grpo_reference(config: dict | None) -> str:
    """``grpo.reference`` of a config (``sft`` when unset, the pipeline's default)."""
    return ((config or {}).get("grpo") or {}).get("reference", "sft")


def training_kl_name(config: dict | None) -> str:
    """What GRPO's and PPO's training KL is to, e.g. "the SFT policy"."""
    reference = grpo_reference(config)
    if reference not in REFERENCE_NAMES:
        raise ValueError(f"grpo.reference={reference!r}: use one of {', '.join(REFERENCE_NAMES)}")
    return REFERENCE_NAMES[reference]


def sft_kl_words(config: dict | None) -> str:
    """What the k1-vs-k3 stage's KL(GRPO || SFT) is, relative to the KL GRPO trained with."""
    if grpo_reference(config) == "sft":
        return "KL(GRPO || SFT): the KL TRL optimises against (grpo.reference: sft)"
    return (f"KL(GRPO || SFT), not the KL GRPO trained against: its reference is {training_kl_name(config)} "
            f"(grpo.reference: {grpo_reference(config)})")
