"""What a config may say to each method, checked as Snakemake parses the workflow (no torch, no TRL): PPO's settings,
the ``grpo`` fields DPO and RLOO inherit, DPO's ``max_length``. PPO's trainer reads ``PPOSettings`` and DPO's the same
``NOT_INHERITED``, so what is checked is what runs.
"""

from __future__ import annotations

import dataclasses

from thai_grpo.core.config import OURS, ConfigError

# ----------------------------------------------------------------------------------------- PPO
@dataclasses.dataclass
class PPOSettings:
    """The ``ppo:`` fields of a variant, TRL 1.12 PPOConfig's names and defaults where it has them."""
    score: str = "reward_model"      # ours: the learned reward model, or ``verifier`` (the code rewards' sum)
    max_steps: int = 40              # rollout batches (TRL: total_episodes / batch_size)
    batch_size: int = 64             # completions per rollout batch, one per prompt (TRL: 512 over all devices)
    num_ppo_epochs: int = 4
    num_mini_batches: int = 1
    learning_rate: float = 3.0e-6    # the policy's (TRL: full fine-tuning of a 1B model)
    value_learning_rate: float | None = None  # ours: the value model's (None: learning_rate, as TRL's one optimizer)
    kl_coef: float = 0.05
    kl_estimator: str = "k1"
    cliprange: float = 0.2
    cliprange_value: float = 0.2
    vf_coef: float = 0.1
    gamma: float = 1.0
    lam: float = 0.95
    whiten_rewards: bool = False
    missing_eos_penalty: float | None = None  # TRL's examples: 1.0
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0        # AdamW's (TRL's TrainingArguments default; torch's own default is 0.01)
    lr_scheduler_type: str = "linear"  # TRL's: decays to 0 over the rollout batches; or constant
    save_steps: int = 10
    temperature: float = 0.7
    max_completion_length: int = 53  # TRL: response_length
    chunk_floats: int | str = 2 ** 28  # ours: floats one chunk of a pass may hold per row (memory_plan); auto: per card

    def __post_init__(self):
        scores = ("reward_model", "verifier")
        if self.score not in scores:
            raise ValueError(f"ppo.score={self.score!r}: use one of {', '.join(scores)}")
        if self.kl_estimator != "k1":
            raise ValueError(f"ppo.kl_estimator={self.kl_estimator!r}: only k1 (TRL's default) is implemented")
        if self.lr_scheduler_type not in ("linear", "constant"):
            raise ValueError(f"ppo.lr_scheduler_type={self.lr_scheduler_type!r}: use linear (TRL's) or constant")
        if self.whiten_rewards:
            raise ValueError("ppo.whiten_rewards: not implemented (TRL's default false: only advantages are whitened)")
        if self.chunk_floats != "auto" and not (isinstance(self.chunk_floats, int) and self.chunk_floats >= 1):
            raise ValueError(f"ppo.chunk_floats={self.chunk_floats!r}: use a positive integer or auto (sized to the "
                             "GPU's memory by the memory plan)")
        if self.batch_size % self.num_mini_batches:
            raise ValueError(f"ppo.batch_size={self.batch_size} is not a multiple of ppo.num_mini_batches="
                             f"{self.num_mini_batches}: pick sizes that divide")


def ppo_settings(grpo_args: dict, overrides: dict | None) -> PPOSettings:
    """TRL 1.12's defaults, then GRPO's temperature and completion budget (PPO samples as GRPO does), then ``ppo:``."""
    shared = {"temperature": grpo_args["temperature"], "max_completion_length": grpo_args["max_completion_length"]}
    return PPOSettings(**{**shared, **(overrides or {})})


# ----------------------------------------------------------------------------------------- DPO
TRL_MAX_LENGTH = 1024  # DPOConfig's default max_length
# Shared names that mean something else in DPO: GRPO's beta is a KL weight, its loss_type a policy-gradient loss, its
# batch size counts completions (DPO's: pairs), and its steps count rollout batches, so DPO takes TRL's schedule (one
# epoch, linear decay) unless its dpo: section sets one.
SCHEDULE = ("max_steps", "num_train_epochs", "gradient_accumulation_steps", "learning_rate", "lr_scheduler_type",
            "warmup_steps", "warmup_ratio")
NOT_INHERITED = ("beta", "loss_type", "per_device_train_batch_size", *SCHEDULE)


def check_max_length_in_config(config: dict) -> None:
    """``dpo.check_max_length`` from the config alone: each DPO variant's ``max_length`` (TRL's 1024 when unset)
    must exceed ``grpo.max_completion_length``; the longest prompt is checked when the job starts."""
    budget = config["grpo"]["max_completion_length"]
    for name, variant in config.get("variants", {}).items():
        if variant.get("method") != "dpo":
            continue
        max_length = variant.get("dpo", {}).get("max_length", TRL_MAX_LENGTH)
        if max_length is not None and max_length <= budget:
            raise ConfigError(f"variants.{name}.dpo.max_length={max_length} leaves no room for a prompt beside the "
                              f"pairs' completion budget (grpo.max_completion_length={budget}): set it to at least "
                              f"the longest prompt plus {budget} (TRL's default is {TRL_MAX_LENGTH})")


# ----------------------------------------------------------------------------------------- all methods
def check_method_fields(config: dict) -> None:
    """Refuse, each in one line naming the nearest valid name: ``rloo:``, ``dpo:`` or ``ppo:`` fields their config
    lacks, a DPO max_length with no room for a prompt, and GRPO-only overrides in an RLOO variant (silently ignored).
    TRL's field names come from a checked-in list: this runs as Snakemake parses the workflow."""
    from thai_grpo.core.trainer_fields import fields_of, unknown_key
    from thai_grpo.methods import variant_plan

    check_max_length_in_config(config)
    classes = {"rloo": (fields_of("RLOOConfig"), "TRL's RLOOConfig"),
               "dpo": (fields_of("DPOConfig"), "TRL's DPOConfig"),
               "ppo": (frozenset(f.name for f in dataclasses.fields(PPOSettings)),
                       "thai_grpo.methods.settings.PPOSettings")}
    for name, overrides in config.get("variants", {}).items():
        method = overrides.get("method", "grpo")
        for section, (fields, owner) in classes.items():
            refusal = unknown_key(overrides.get(section, {}), fields, f"variants.{name}.{section}", owner)
            if refusal:
                raise ConfigError(refusal)
            if overrides.get(section) and method != section:
                raise ConfigError(f"variants.{name}.{section} is set but the variant's method is {method}: "
                                  f"add 'method: {section}' or remove the section")
        if method == "ppo":
            try:
                ppo_settings(variant_plan(config, name)["grpo_args"], overrides.get("ppo"))
            except ValueError as error:
                raise ConfigError(f"variants.{name}: {error}") from None
        if method == "rloo":
            grpo_only = sorted(set(overrides.get("grpo", {})) - fields_of("RLOOConfig") - set(OURS))
            if grpo_only:
                raise ConfigError(f"variants.{name}.grpo.{grpo_only[0]} has no RLOO counterpart (RLOOConfig has no "
                                  "such field) and would be ignored: remove it from this RLOO variant")
