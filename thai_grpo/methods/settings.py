"""PPO's settings (no torch, no TRL): what PPO's trainer reads, with their defaults. A config's ``ppo:`` sections are
checked against config/schema.yaml's ``$defs/ppo`` (the same names, their allowed values) before any job starts.
"""

from __future__ import annotations

import dataclasses


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


def ppo_settings(grpo_args: dict, overrides: dict | None) -> PPOSettings:
    """TRL 1.12's defaults, then GRPO's temperature and completion budget (PPO samples as GRPO does), then ``ppo:``."""
    shared = {"temperature": grpo_args["temperature"], "max_completion_length": grpo_args["max_completion_length"]}
    return PPOSettings(**{**shared, **(overrides or {})})
