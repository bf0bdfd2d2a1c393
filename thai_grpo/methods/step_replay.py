"""A float16 step the loss scaler skipped, run again at the lowered scale (``thai_grpo.methods.recorder``): imported
by a float16 run only."""

from __future__ import annotations


class StepReplay:
    """The micro-batches of a TRL trainer's current optimizer step, kept as the trainer prepared them, to run them
    forward and backward again."""

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
