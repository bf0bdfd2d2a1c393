"""Training runs for the tests, by name: a ``thai_grpo.methods.RunSpec`` of one method on local stand-ins."""

from __future__ import annotations

from pathlib import Path

from thai_grpo.data.problems import SYSTEM_PROMPT
from thai_grpo.methods import RunSpec

REWARDS = ["correct", "format", "thai"]


def plan(method: str = "grpo", grpo: dict | None = None, rewards=REWARDS, **sections) -> dict:
    """A variant plan as ``variant_plan`` builds it: ``grpo`` the trainer arguments it inherits, ``sections`` the
    method's own (``rloo``, ``dpo``, ``ppo``)."""
    return {"variant": method, "method": method, "group": "method", "grpo": dict(grpo or {}),
            "rewards": [] if method == "dpo" else list(rewards),
            **{key: dict(sections.get(key) or {}) for key in ("rloo", "dpo", "ppo")}}


def run_spec(folder: Path, name: str, base, adapter, run_plan: dict, rows=(), seed: int = 0, **extra) -> RunSpec:
    """The run ``name`` of ``run_plan`` writing its adapter to ``folder/name`` and its checkpoints to
    ``folder/ckpt-name`` (unless ``extra`` says otherwise); ``extra``: RunSpec's other fields (dtype, pairs,
    reward_dir, training, rollouts, ...)."""
    fields = {"system_prompt": SYSTEM_PROMPT, "out_dir": Path(folder) / name,
              "checkpoint_dir": Path(folder) / f"ckpt-{name}", **extra}
    return RunSpec(run=name, plan=run_plan, base_dir=Path(base), adapter_dir=Path(adapter), train_rows=list(rows),
                   seed=seed, **fields)
