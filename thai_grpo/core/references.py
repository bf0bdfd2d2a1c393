"""What each KL in the run is measured against, in words computed from the config's ``grpo.reference``.

GRPO's training KL (and PPO's, which shares its reference) is to ``grpo.reference``: ``sft`` = the SFT policy
GRPO starts from, ``base`` = the base model with the adapter disabled (the chapter's). The k1-vs-k3 stage
(``thai_grpo.evaluation.token_logprobs``) always scores GRPO's samples under the SFT policy: KL(GRPO || SFT), the KL
TRL optimises against only when the reference is ``sft``.
"""

from __future__ import annotations

REFERENCE_NAMES = {"sft": "the SFT policy", "base": "the base model (adapter disabled)"}


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
