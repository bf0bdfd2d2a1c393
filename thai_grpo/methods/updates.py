"""Every optimizer update counted: float16's loss scaler silently skips a step whose gradients overflowed, and without a
scaler a non-finite gradient is applied. A stage whose lost updates (either) exceed ``training.max_lost_update_share``
of its steps stops with one line, keeping its checkpoints.
"""

from __future__ import annotations

import json
from pathlib import Path

from thai_grpo.core.io import read_appended_jsonl

UPDATES_FILE = "updates.jsonl"
COUNTS = ("optimizer_steps_skipped", "nonfinite_grad_steps")


class LostUpdates(SystemExit):
    """A training stage stopped because too many updates were lost: a SystemExit, so the job ends with the one-line
    message, no traceback, and the checkpoints stay for a resume."""


def gradients_finite(parameters) -> bool:
    """Whether every gradient of ``parameters`` (those that have one) is finite."""
    import torch

    grads = [p.grad for p in parameters if p.grad is not None]
    return bool(torch.stack([torch.isfinite(g).all() for g in grads]).all()) if grads else True


def scaler_skipped(scale_before: float, scaler) -> bool:
    """Whether ``scaler.step`` skipped the optimizer step: an enabled ``GradScaler`` lowers its scale after, and only
    after, a step whose gradients overflowed."""
    return bool(scaler.is_enabled()) and scaler.get_scale() < scale_before


def update_record(step: int, skipped: bool, finite: bool) -> dict:
    return {"step": step, "optimizer_step_skipped": bool(skipped), "nonfinite_grad": not finite}


def update_counts(records: list[dict]) -> dict:
    """``optimizer_steps_skipped`` and ``nonfinite_grad_steps`` of a run's per-step records."""
    return {"optimizer_steps_skipped": sum(bool(r.get("optimizer_step_skipped")) for r in records),
            "nonfinite_grad_steps": sum(bool(r.get("nonfinite_grad")) for r in records)}


def lost_updates(records: list[dict]) -> int:
    """Steps whose update was skipped or made from non-finite gradients."""
    return sum(bool(r.get("optimizer_step_skipped") or r.get("nonfinite_grad")) for r in records)


def check_lost_updates(run: str, records: list[dict], total_steps: int, max_share: float) -> None:
    """Stop (``LostUpdates``) once the lost updates of ``records`` exceed ``max_share`` of the run's ``total_steps``."""
    lost = lost_updates(records)
    if lost > max_share * max(total_steps, 1):
        counts = update_counts(records)
        raise LostUpdates(
            f"{run}: {lost} of {total_steps} optimizer updates lost by step {records[-1]['step']} "
            f"({counts['optimizer_steps_skipped']} skipped by the float16 loss scaler, {counts['nonfinite_grad_steps']} "
            f"with non-finite gradients), more than training.max_lost_update_share={max_share:g} allows: the "
            "checkpoints are kept; use bfloat16 (base.dtype) on a GPU that has it, lower the learning rate, or raise "
            "the share and rerun to resume")


def update_counter(path: str | Path, run: str, max_share: float):
    """A TrainerCallback counting TRL's updates: before each optimizer step it checks the gradients and reads the loss
    scale, after it asks the scaler whether it skipped (``scaler_skipped``: accelerate's ``optimizer_step_was_skipped``
    misses a fused AdamW's skip). One line per step in ``path``; ``last`` for the step logger. Give it the trainer with
    ``watch``: callbacks are handed no accelerator."""
    from transformers import TrainerCallback

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    class UpdateCounter(TrainerCallback):
        last: dict = {}
        finite, scale_before, accelerator = True, 1.0, None

        def watch(self, trainer):
            self.accelerator = trainer.accelerator
            return trainer

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            self.finite = gradients_finite(p for p in model.parameters() if p.requires_grad)
            scaler = self.accelerator.scaler
            self.scale_before = scaler.get_scale() if scaler is not None and scaler.is_enabled() else 1.0

        def on_step_end(self, args, state, control, **kwargs):
            scaler = self.accelerator.scaler
            skipped = scaler is not None and scaler_skipped(self.scale_before, scaler)
            self.last = update_record(state.global_step, skipped, self.finite)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(self.last) + "\n")
            check_lost_updates(run, read_appended_jsonl(path), state.max_steps, max_share)

    return UpdateCounter()
