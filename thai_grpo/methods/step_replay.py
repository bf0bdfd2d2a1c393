"""What only float16 needs (``methods.recorder`` imports it for a float16 run, PPO for its own loop): torch's loss
scaler on a CPU, and a step the scaler skipped run again. The scaler halves its scale after each overflow, so a skipped
step is redone at the lowered scale (counted in ``scaler_redos``): calibration costs compute, never an update."""

from __future__ import annotations

MAX_REDOS = 16  # halvings of the loss scale one step may take (2^16 -> 1) before its update counts as lost


def scaler_skipped(scale_before: float, scaler) -> bool:
    """Whether ``scaler.step`` skipped the optimizer step: an enabled ``GradScaler`` lowers its scale after, and only
    after, a step whose gradients overflowed."""
    return bool(scaler.is_enabled()) and scaler.get_scale() < scale_before


def scale_float16_losses_on_cpu(trainer) -> None:
    """Give a CPU trainer with ``fp16=True`` float16 autocast and torch's loss scaler, as on a T4: accelerate silently
    runs neither on a CPU. Call before ``train()``."""
    import torch

    accelerator = trainer.accelerator
    if trainer.args.fp16 and accelerator.device.type == "cpu" and accelerator.scaler is None:
        accelerator.native_amp = True
        accelerator.scaler = torch.amp.GradScaler("cpu")


class StepReplay:
    """A float16 TRL trainer's loss scaling (on a CPU too) and the micro-batches of its current optimizer step, kept
    as the trainer prepared them to run them again when the scaler skipped the step."""

    def __init__(self, trainer):
        scale_float16_losses_on_cpu(trainer)
        self.trainer, self.batches, self.queued = trainer, [], []
        self.scale_before, self.redos = 1.0, 0
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

    def scale(self) -> float:
        scaler = self.trainer.accelerator.scaler
        return scaler.get_scale() if scaler is not None and scaler.is_enabled() else 1.0

    def note_scale(self) -> None:
        """Before an optimizer step: its scale, no redo yet."""
        self.scale_before, self.redos = self.scale(), 0

    def skipped(self) -> bool:
        """Whether the scaler skipped the step (accelerate's ``optimizer_step_was_skipped`` misses a fused AdamW's)."""
        scaler = self.trainer.accelerator.scaler
        return scaler is not None and scaler_skipped(self.scale_before, scaler)

    def redo_skipped(self, model) -> bool:
        """Run a skipped step again at the lowered scale (at most ``MAX_REDOS`` times); False when none was redone."""
        if not self.skipped() or self.redos >= MAX_REDOS:
            return False
        self.scale_before, self.redos = self.scale(), self.redos + 1
        self.step_again(model)
        return True

    def step_again(self, model) -> None:
        """The step again from zero gradients (at the scaler's scale now), clipped as the trainer clips, then the
        optimizer step."""
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
        trainer.optimizer.step()
