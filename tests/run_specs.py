"""Training runs for the tests, by name: a ``thai_grpo.methods.RunSpec`` of one method on local stand-ins."""

from __future__ import annotations

from pathlib import Path

import yaml

from thai_grpo.data.prompts import SYSTEM_PROMPT
from thai_grpo.methods import RunSpec
from thai_grpo.workflow import method_grpo_args

REWARDS = ["correct", "format", "thai"]


def schema_defaults(section: str) -> dict:
    """The defaults config/schema.yaml gives a section's fields (what Snakemake fills in before any job runs)."""
    schema = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/schema.yaml").read_text(encoding="utf-8"))
    return {key: field["default"] for key, field in schema["properties"][section]["properties"].items()
            if "default" in field}


TRAINING = schema_defaults("training")
GRPO = schema_defaults("grpo")


def plan(method: str = "grpo", grpo: dict | None = None, rewards=REWARDS, **sections) -> dict:
    """A variant plan as ``variant_plan`` builds it: ``grpo`` on top of the schema's grpo defaults, of which the plan
    keeps what the method reads (``method_grpo_args``); ``sections`` the method's own (``rloo``, ``dpo``, ``ppo``)."""
    return {"variant": method, "method": method, "group": "method",
            "grpo_args": method_grpo_args(method, {**GRPO, **(grpo or {})}),
            "rewards": [] if method == "dpo" else list(rewards),
            **{key: dict(sections.get(key) or {}) for key in ("rloo", "dpo", "ppo")}}


def run_spec(folder: Path, name: str, base, adapter, run_plan: dict, rows=(), seed: int = 0, **extra) -> RunSpec:
    """The run ``name`` of ``run_plan`` writing its adapter to ``folder/name`` and its checkpoints to
    ``folder/ckpt-name`` (unless ``extra`` says otherwise); ``extra``: RunSpec's other fields (dtype, pairs,
    reward_dir, training, rollouts, ...)."""
    fields = {"system_prompt": SYSTEM_PROMPT, "out_dir": Path(folder) / name,
              "checkpoint_dir": Path(folder) / f"ckpt-{name}", "training": TRAINING, **extra}
    return RunSpec(run=name, plan=run_plan, base_dir=Path(base), adapter_dir=Path(adapter), train_rows=list(rows),
                   seed=seed, **fields)
