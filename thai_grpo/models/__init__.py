"""Models: building, loading, training and sampling one model, whatever the method.

Tokenizer, scratch base, policy and adapter loading (``loading``), the base's pretraining and the SFT adapter
(``sft``), the trainer plumbing that SFT and every method share (``training``: arguments, checkpoints, progress),
sampling completions from a model (``sampling``: held-out samples, PPO's rollouts, DPO's pairs), and the CPU
speed-ups of the GRPO-family trainers, a layer a reader can skip (``cpu``). It may import ``jobs``, ``data`` and
``core``, never ``methods``, ``evaluation`` or ``report``.
"""
