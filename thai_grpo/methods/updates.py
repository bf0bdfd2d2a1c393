"""Every optimizer update counted: float16's loss scaler silently skips a step whose gradients overflowed, and without a
scaler a non-finite gradient is applied. A stage whose lost updates (either) exceed ``training.max_lost_update_share``
of its steps stops with one line, keeping its checkpoints.

Dynamic loss scaling starts high on purpose (2^16) and halves the scale after each overflow: its first steps calibrate
it. A skipped step is therefore redone at the lowered scale (its micro-batches forward and backward again, up to
``MAX_REDOS`` times), so calibration costs compute, never an update; each redo is counted (``scaler_redos``). Scaling
by a power of two is exact, so a redone step's update is the one a run started at the lowered scale makes.
"""

from __future__ import annotations

import json
from pathlib import Path

from thai_grpo.core.io import read_appended_jsonl

UPDATES_FILE = "updates.jsonl"
COUNTS = ("optimizer_steps_skipped", "nonfinite_grad_steps", "scaler_redos")
MAX_REDOS = 16  # halvings of the loss scale one step may take (2^16 -> 1) before its update counts as lost


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


def update_record(step: int, skipped: bool, finite: bool, redos: int = 0) -> dict:
    """One optimizer step: whether its update was finally skipped (lost), whether its gradients were finite, and how
    often the loss scaler skipped it before (each time redone at half the scale)."""
    return {"step": step, "optimizer_step_skipped": bool(skipped), "nonfinite_grad": not finite, "scaler_redos": redos}


def update_counts(records: list[dict]) -> dict:
    """``optimizer_steps_skipped`` (lost) and ``nonfinite_grad_steps`` of a run's per-step records, and
    ``scaler_redos``: the steps the loss scaler skipped and that were redone at a lower scale."""
    skipped, nonfinite, redos = COUNTS
    return {skipped: sum(bool(r.get("optimizer_step_skipped")) for r in records),
            nonfinite: sum(bool(r.get("nonfinite_grad")) for r in records),
            redos: sum(int(r.get("scaler_redos", 0)) for r in records)}


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


class StepReplay:
    """The micro-batches of a TRL trainer's current optimizer step, kept as the trainer prepared them (a GRPO batch
    with its completions and rewards, a DPO batch of pairs) to run them forward and backward again."""

    def __init__(self, trainer):
        self.trainer, self.batches, self.queued = trainer, [], []
        training_step, prepare_inputs = trainer.training_step, trainer._prepare_inputs

        def kept_training_step(model, inputs, num_items_in_batch=None):
            self.batches.append([inputs, num_items_in_batch, None])
            return training_step(model, inputs, num_items_in_batch)

        def kept_prepare_inputs(inputs):
            prepared = self.queued.pop(0) if self.queued else prepare_inputs(inputs)
            if self.batches and self.batches[-1][2] is None:
                self.batches[-1][2] = prepared
            return prepared

        trainer.training_step, trainer._prepare_inputs = kept_training_step, kept_prepare_inputs

    def clear(self) -> None:
        self.batches = []

    def step_again(self, model) -> bool:
        """The step's micro-batches forward and backward again from zero gradients (at the scaler's scale now), clipped
        as the trainer clips, then the optimizer step. Returns whether the gradients were finite."""
        trainer = self.trainer
        model.zero_grad()
        batches, self.batches = self.batches, []
        self.queued = [prepared for _, _, prepared in batches]
        micro_steps = getattr(trainer, "_step", None)  # the GRPO family counts micro-batches: a redo is not one
        for inputs, num_items_in_batch, _ in batches:
            trainer.training_step(model, inputs, num_items_in_batch)
        if micro_steps is not None:
            trainer._step = micro_steps
        if trainer.args.max_grad_norm and trainer.args.max_grad_norm > 0:
            trainer._clip_grad_norm(model)
        finite = gradients_finite(p for p in model.parameters() if p.requires_grad)
        trainer.optimizer.step()
        return finite


def update_counter(path: str | Path, run: str, max_share: float):
    """A TrainerCallback counting TRL's updates: before each optimizer step it checks the gradients and reads the loss
    scale, after it asks the scaler whether it skipped (``scaler_skipped``: accelerate's ``optimizer_step_was_skipped``
    misses a fused AdamW's skip) and, in float16, redoes a skipped step at the lowered scale (``StepReplay``). One line
    per step in ``path``; ``last`` for the step logger. Give it the trainer with ``watch``: callbacks are handed no
    accelerator."""
    from transformers import TrainerCallback

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    class UpdateCounter(TrainerCallback):
        last: dict = {}
        finite, scale_before, redos, accelerator, replay = True, 1.0, 0, None, None

        def watch(self, trainer):
            self.accelerator = trainer.accelerator
            if trainer.args.fp16:  # only float16 has a loss scaler to calibrate
                self.replay = StepReplay(trainer)
            return trainer

        def on_step_begin(self, args, state, control, **kwargs):
            if self.replay is not None:
                self.replay.clear()

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            self.finite = gradients_finite(p for p in model.parameters() if p.requires_grad)
            self.scale_before, self.redos = self.scale(), 0

        def on_optimizer_step(self, args, state, control, model=None, **kwargs):
            while self.replay is not None and self.skipped() and self.redos < MAX_REDOS:
                self.scale_before, self.redos = self.scale(), self.redos + 1
                self.finite = self.replay.step_again(model)

        def on_step_end(self, args, state, control, **kwargs):
            self.last = update_record(state.global_step, self.skipped(), self.finite, self.redos)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(self.last) + "\n")
            check_lost_updates(run, read_appended_jsonl(path), state.max_steps, max_share)

        def scale(self) -> float:
            scaler = self.accelerator.scaler
            return scaler.get_scale() if scaler is not None and scaler.is_enabled() else 1.0

        def skipped(self) -> bool:
            scaler = self.accelerator.scaler
            return scaler is not None and scaler_skipped(self.scale_before, scaler)

    return UpdateCounter()
