"""GRPO on the SFT policy with TRL's ``GRPOTrainer``, recording per-step metrics from the groups.

Where this departs from the textbook (DeepSeekMath) algorithm, and why:
- Loss: TRL's, chosen by ``grpo.loss_type`` (``grpo``: per-completion token mean, as in the chapter;
  ``dr_grpo`` with ``scale_rewards: none`` for Dr.GRPO). PPO's clipped surrogate with ``epsilon``.
- Baseline: the group mean; advantages divided by the group std unless ``scale_rewards`` is ``none``.
- KL: k3 per token, weight ``beta``; plain k3 (the chapter's) with ``use_bias_correction_kl: false``, TRL 1.16's
  default True multiplies it by the importance ratio. Reference (``grpo.reference``, ours): ``base`` = the base
  model with the adapter disabled (the chapter's pi_ref); ``sft`` = a frozen copy of the starting adapter (TRL's
  ``ref`` adapter, which TRL 1.16 makes for a ready ``PeftModel`` when beta > 0: DeepSeekMath's definition).
  No value network, no reward model.
The objective TRL computes, written out as the chapter writes it, is ``thai_grpo.methods.objective``
(tests/test_objective.py checks it against TRL's loss on a real batch of this trainer).

Of TRL's private methods, the trainer here overrides the train sampler (``resumable``: correctness of a resumed run)
and, on a CPU only, the rollouts and log-probability passes (``sharing_prompts``: each group's prompt computed once,
measured ~1.7x faster per step there); on a GPU generation and scoring are TRL's own.

The rollout loop (``train_with_rollouts``: groups graded by the code rewards, per-step metrics, example groups,
empty-think completions, resumable checkpoints) is shared with RLOO (``thai_grpo.methods.rloo``).
"""

from __future__ import annotations

import json
from pathlib import Path

from thai_grpo.core.io import atomic_directory, read_appended_jsonl, write_json, write_jsonl
from thai_grpo.core.rewards import completion_text, reward_functions
from thai_grpo.data.problems import grpo_records
from thai_grpo.methods.advantages import group_advantages
from thai_grpo.methods.metrics import (batch_metrics, browse_steps, check_group_order, empty_think_examples,
                                       example_groups, first_and_latest, total_rewards, with_trl_logs)
from thai_grpo.methods.updates import UPDATES_FILE, update_counter, update_counts
from thai_grpo.models.training import (clear_checkpoints, last_checkpoint, progress_callback,
                                       scale_float16_losses_on_cpu, seed_everything, trainer_args)

KL_REFERENCES = {"sft": "frozen copy of the SFT adapter (TRL's 'ref' adapter): the KL is to the SFT policy",
                 "base": "the base model with the adapter disabled: the KL is to the base, as in the chapter"}
NO_KL = "none: beta = 0, no KL term and no reference pass"
METRICS_FILE = "step_metrics.jsonl"
EXAMPLES_FILE = "example_groups.json"
EMPTY_THINK_FILE = "empty_think_examples.json"
ROLLOUTS_FILE = "rollouts.jsonl"  # every completion of every step, as TRL's log_completions table shows them
STEP_FILES = (METRICS_FILE, UPDATES_FILE, ROLLOUTS_FILE)  # JSONL, one line per step (or per completion of a step)
MAX_EMPTY_THINK_EXAMPLES = 8  # reward-hacking completions kept per run (the first and the latest ones seen)


class GroupRecorder:
    """Wraps the reward functions so that every completion's rewards of the last batch are kept.

    With the tokenizer, each reward function grades the exact generated text, ``tokenizer.decode(ids,
    skip_special_tokens=True)`` of the completion ids TRL passes (what TRL itself hands over when the tokenizer
    has no response template, and what held-out sampling grades). With a response template TRL hands over
    parsed messages instead, which lose what the parser drops: an empty ``<think></think>`` (the lenient format's
    reward hack) and any text before ``<think>``. Without the tokenizer or the ids, ``completion_text`` rebuilds
    ``<think>reasoning</think>content`` from the message.
    """

    def __init__(self, group_size: int, tokenizer=None):
        self.group_size = group_size
        self.tokenizer = tokenizer
        self.batch: dict = {}

    def texts(self, completions, completion_ids=None) -> list[str]:
        """The completions' texts as the rewards grade them (see the class docstring)."""
        if self.tokenizer is not None and completion_ids is not None:
            return [self.tokenizer.decode(list(ids), skip_special_tokens=True) for ids in completion_ids]
        return [completion_text(c) for c in completions]

    def wrap(self, name: str, function):
        def recorded(prompts, completions, completion_ids=None, **kwargs):
            texts = self.texts(completions, completion_ids)
            values = function(prompts=prompts, completions=texts, completion_ids=completion_ids, **kwargs)
            self.batch.setdefault("rewards", {})[name] = [float(v) for v in values]
            self.batch["prompts"] = [json.dumps(p, ensure_ascii=False) if not isinstance(p, str) else p
                                     for p in prompts]
            self.batch["completions"] = texts
            self.batch["ids"] = list(kwargs.get("id") or [None] * len(texts))
            self.batch["lengths"] = [len(ids) for ids in completion_ids] if completion_ids is not None else \
                [len(t) for t in texts]
            return values

        recorded.__name__ = name
        return recorded

    def take(self) -> dict:
        batch, self.batch = self.batch, {}
        return batch


def rollout_lines(step: int, batch: dict, totals, advantages) -> list[dict]:
    """One line per completion of a step's batch, as TRL's ``log_completions`` table shows them: the step, the prompt's
    id, the completion, each reward, their sum and the completion's advantage."""
    return [{"step": step, "prompt_id": prompt_id, "completion": text,
             "rewards": {name: values[i] for name, values in batch["rewards"].items()}, "reward": float(totals[i]),
             "advantage": round(float(advantages[i]), 6)}
            for i, (prompt_id, text) in enumerate(zip(batch["ids"], batch["completions"]))]


def append_lines(path: Path, lines: list[dict]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))


def make_step_logger(recorder: GroupRecorder, metrics_path: Path, scale_by_std: bool = True,
                     examples: dict | None = None, empty_thinks: list | None = None, advantages=None, updates=None):
    """A TrainerCallback that turns each logged step into one line of ``metrics_path`` (JSONL), with the step's update
    flags from ``updates`` (the ``update_counter`` callback, which ran before it), and its completions into
    ``rollouts.jsonl`` beside it.

    The files sit beside the checkpoints, so the records of steps done before an interruption survive; so do
    the example groups (``example_groups.json``) and the empty-think completions (``empty_think_examples.json``)
    beside it, which a resumed run starts from (``examples``, ``empty_thinks``). ``advantages(totals, G)``
    gives the method's own advantages (default: GRPO's, ``scale_by_std`` or not).
    """
    from transformers import TrainerCallback

    examples_path = metrics_path.with_name(EXAMPLES_FILE)
    empty_think_path = metrics_path.with_name(EMPTY_THINK_FILE)
    rollouts_path = metrics_path.with_name(ROLLOUTS_FILE)

    class StepLogger(TrainerCallback):
        def __init__(self):
            self.examples = dict(examples or {})
            self.empty_thinks = list(empty_thinks or [])

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or ("reward" not in logs and "loss" not in logs):
                return  # not a training step's log (e.g. the run's closing summary)
            flags = {k: v for k, v in (updates.last if updates else {}).items() if k != "step"}
            batch = recorder.take()
            if not batch:  # a reused generation batch (num_iterations > 1): no new rewards, but TRL's clip ratio
                append_lines(metrics_path, [{"step": state.global_step, "reused_batch": True,
                                             **with_trl_logs({}, logs), **flags}])
                return
            check_group_order(batch["prompts"], recorder.group_size)
            metrics = batch_metrics(batch["rewards"], batch["lengths"], recorder.group_size, batch["completions"])
            append_lines(metrics_path, [{"step": state.global_step, **with_trl_logs(metrics, logs), **flags}])
            totals = total_rewards(batch["rewards"])
            own = advantages(totals, recorder.group_size) if advantages else \
                group_advantages(totals, recorder.group_size, scale_by_std=scale_by_std)
            append_lines(rollouts_path, rollout_lines(state.global_step, batch, totals, own))
            found = example_groups(totals, batch["prompts"], batch["completions"], recorder.group_size,
                                   scale_by_std, advantages=own)
            if state.global_step in browse_steps(state.max_steps):  # a later step's group, for the report to browse
                found[f"step{state.global_step}"] = found.get("mixed") or found.get("all_equal")
            for kind, group in found.items():
                if kind not in self.examples:
                    self.examples[kind] = {"step": state.global_step, **group}
                    write_json(examples_path, self.examples)
            found = empty_think_examples(batch["prompts"], batch["completions"], totals, state.global_step,
                                         MAX_EMPTY_THINK_EXAMPLES)
            if found:
                self.empty_thinks = first_and_latest(self.empty_thinks, found, MAX_EMPTY_THINK_EXAMPLES)
                write_json(empty_think_path, self.empty_thinks)

    return StepLogger()


def read_step_metrics(metrics_path: Path, up_to_step: int | None = None) -> list[dict]:
    """The recorded steps (``io.read_appended_jsonl``: a last line cut short by a kill is dropped, its step redone)."""
    return [s for s in read_appended_jsonl(metrics_path) if up_to_step is None or s["step"] <= up_to_step]


def _truncate_step_files_to(checkpoint_dir: Path, step: int) -> tuple[dict, list]:
    """After a resume from checkpoint-N, forget the step records (metrics, updates, rollouts), example groups and
    empty-think completions of steps beyond N (they will be redone); return the example groups and empty-think
    completions kept."""
    for name in STEP_FILES:
        path = checkpoint_dir / name
        kept = read_step_metrics(path, up_to_step=step)
        path.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in kept), encoding="utf-8")
    examples_path, empty_think_path = checkpoint_dir / EXAMPLES_FILE, checkpoint_dir / EMPTY_THINK_FILE
    examples = json.loads(examples_path.read_text()) if examples_path.exists() else {}
    empty_thinks = json.loads(empty_think_path.read_text()) if empty_think_path.exists() else []
    return ({kind: group for kind, group in examples.items() if group["step"] <= step},
            [example for example in empty_thinks if example["step"] <= step])


def start_step_log(checkpoint_dir: str | Path) -> tuple[Path, str | None, dict, list]:
    """The step-metrics file of a training stage, the checkpoint to resume from (None: a fresh start, whose
    leftover step files are removed), and the example groups and empty-think completions a resume keeps."""
    checkpoint_dir = Path(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    metrics_path = checkpoint_dir / METRICS_FILE
    resume_from = last_checkpoint(checkpoint_dir)
    if resume_from is None:
        for name in (*STEP_FILES, EXAMPLES_FILE, EMPTY_THINK_FILE):
            (checkpoint_dir / name).unlink(missing_ok=True)
        return metrics_path, None, {}, []
    print(f"resuming from {Path(resume_from).name} in {checkpoint_dir}", flush=True)
    return metrics_path, resume_from, *_truncate_step_files_to(checkpoint_dir, int(Path(resume_from).name.split("-")[-1]))


def epoch_seeded(sampler):
    """TRL's ``RepeatSampler`` made resumable: epoch e's prompt order no longer depends on where the run started.

    ``RepeatSampler`` seeds its generator once and draws a new permutation each epoch, so a run resumed in
    epoch e would replay epoch 0's order. The returned sampler gives epoch e the (e+1)-th permutation of the
    seed's generator, as in an uninterrupted run; the Trainer announces the epoch through ``set_epoch``.
    Any other sampler is returned unchanged.
    """
    import torch
    from trl.trainer.utils import RepeatSampler

    if type(sampler) is not RepeatSampler:
        return sampler

    class EpochRepeatSampler(RepeatSampler):
        epoch: int | None = None

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __iter__(self):
            if self.shuffle and self.seed is not None and self.epoch is not None:
                self.generator.manual_seed(self.seed)
                for _ in range(self.epoch):
                    torch.randperm(self.num_samples, generator=self.generator)
            return super().__iter__()

    return EpochRepeatSampler(data_source=sampler.data_source, mini_repeat_count=sampler.mini_repeat_count,
                              batch_size=sampler.batch_size, repeat_count=sampler.repeat_count,
                              shuffle=sampler.shuffle, seed=sampler.seed)


def resumable(trainer_class):
    """``trainer_class`` (GRPOTrainer, RLOOTrainer) with an ``epoch_seeded`` train sampler: a resumed run sees
    the prompts in the same order.

    Kept for correctness: TRL's ``_get_train_sampler`` returns a ``RepeatSampler`` seeded once, so a run resumed from
    a checkpoint in epoch e would replay epoch 0's prompt order, and the resumed run would not be the run it
    continues (tests/test_resume.py; the killed run of tests/test_pipeline.py). Only the sampler is wrapped; TRL
    builds it."""

    class Resumable(trainer_class):
        def _get_train_sampler(self, dataset=None):
            return epoch_seeded(super()._get_train_sampler(dataset))

    Resumable.__name__ = f"Resumable{trainer_class.__name__}"
    return Resumable


class _SharedPromptGenerate:
    """``model.generate`` replaced, on this instance only and while the block runs, by ``generate_sharing_prompts``
    (each distinct prompt prefilled once), on ``merged`` (a ``MergedCopy`` of the policy, refreshed first) when
    given, else on the policy itself."""

    def __init__(self, model, merged=None):
        self.model, self.merged = model, merged

    def __enter__(self):
        from thai_grpo.models.shared_prefix import generate_sharing_prompts

        model, merged = self.model, self.merged
        if merged is not None:
            sampler = merged.refresh()
            model.generate = lambda input_ids, attention_mask, generation_config, **kwargs: generate_sharing_prompts(
                sampler, input_ids, attention_mask, generation_config, **kwargs)
        else:
            original = model.generate
            model.generate = lambda input_ids, attention_mask, generation_config, **kwargs: generate_sharing_prompts(
                model, input_ids, attention_mask, generation_config, generate=original, **kwargs)
        return model

    def __exit__(self, *exc):
        del self.model.generate  # the class's method again
        return False


def shares_prompts_on(device, use_vllm: bool = False) -> bool:
    """Whether ``sharing_prompts`` replaces TRL's rollouts and log-probability passes on ``device``: on a CPU only,
    where it was measured to pay (``sharing_prompts``); on a GPU and with vLLM, both are TRL's own."""
    import torch

    return torch.device(device).type == "cpu" and not use_vllm


def sharing_prompts(trainer_class):
    """``trainer_class`` (GRPOTrainer, RLOOTrainer) computing each group's shared prompt once, on a CPU
    (``shares_prompts_on``): in the rollouts (``_generate_single_turn`` runs TRL's own with ``model.generate``
    replaced, on this instance and for that call only, by ``generate_sharing_prompts``, from a merged copy of the
    policy where ``can_merge_copy``) and in every log-probability pass, the policy's with grad and the reference's
    (``_get_per_token_logps_and_entropies`` -> ``completion_logprobs_sharing_prompts``). The same numbers up to the
    order of floating-point sums (tests/test_shared_prefix.py; tests/test_objective.py checks the loss TRL computes
    from them). Multimodal or MoE batches, and activation checkpointing (which drops the cache a shared prompt lives
    in), take TRL's own log-probability pass, over the completion positions only (``scoring_labelled_positions_only``).
    On a GPU and with vLLM every pass is TRL's own: no one measured it there.

    Why the two overrides stay, measured on a CPU: GRPO steps of the offline default (config/config.yaml: 8 prompts x
    8 completions of up to 80 tokens, the shipped base and SFT adapter), 1 thread, the mean of 3 steps after a
    warm-up, 2 interleaved repetitions, on the project's 2-core AMD EPYC while other jobs ran (load average 3 to 7: the
    figures are ranges, not a quiet measurement), with each override switched back to TRL's method in turn:
    - log-probability passes: the step takes 4.5-5.5 s with them, 8.4-8.7 s with TRL's (~1.7x); the reference pass
      0.65-0.79 s against 1.41-1.49 s, forward and backward 1.8-2.5 s against 4.6-4.8 s. A step reads
      8 x 95 + 64 x 46 prompt and completion positions instead of 64 x 141.
    - rollouts: generation takes 1.93-2.00 s with the shared prompts (policy unmerged) against 2.49-2.63 s with
      TRL's generate (~1.3x). The merged copy on top: 1.69 s against 2.23 s (medians of 6 interleaved draws of one
      generation batch, refresh included: ~1.3x), though within the noise in the whole-step runs (2.15-2.25 s)."""
    from thai_grpo.models.shared_prefix import (completion_logprobs_sharing_prompts,
                                                scoring_labelled_positions_only)

    class SharingPrompts(trainer_class):
        def _shares_prompts(self) -> bool:
            return shares_prompts_on(self.accelerator.device, self.use_vllm)

        def _generate_single_turn(self, *args, **kwargs):
            if not self._shares_prompts():
                return super()._generate_single_turn(*args, **kwargs)
            from thai_grpo.models.merged_sampler import MergedCopy, can_merge_copy

            policy = self.accelerator.unwrap_model(self.model)
            if getattr(self, "_merged_copy", None) is None and can_merge_copy(policy):
                self._merged_copy = MergedCopy(policy)
            with _SharedPromptGenerate(policy, getattr(self, "_merged_copy", None)):
                return super()._generate_single_turn(*args, **kwargs)

        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                               batch_size=None, compute_entropy=False, compute_aux_loss=False,
                                               **multimodal):
            checkpointing = getattr(self.args, "activation_checkpointing", False)
            if (not self._shares_prompts() or checkpointing or compute_aux_loss
                    or any(value is not None for value in multimodal.values())):
                with scoring_labelled_positions_only():  # TRL's pass, over the completion positions only
                    return super()._get_per_token_logps_and_entropies(
                        model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy,
                        compute_aux_loss, **multimodal)
            import torch

            batch_size = batch_size or input_ids.size(0)
            logps, entropies = [], []
            for start in range(0, input_ids.size(0), batch_size):  # TRL's chunks of rows, each sharing its prompts
                ids, mask = input_ids[start:start + batch_size], attention_mask[start:start + batch_size]
                shared = completion_logprobs_sharing_prompts(model, ids, mask, logits_to_keep, compute_entropy,
                                                             self.accelerator.autocast)
                if shared is None:
                    shared = super()._get_per_token_logps_and_entropies(model, ids, mask, logits_to_keep,
                                                                        compute_entropy=compute_entropy)[:2]
                logps.append(shared[0])
                entropies.append(shared[1])
            return torch.cat(logps), torch.cat(entropies) if compute_entropy else None, None

    SharingPrompts.__name__ = f"SharingPrompts{trainer_class.__name__}"
    return SharingPrompts


def use_reference(trainer, reference: str) -> str:
    """Point the trainer's KL at ``reference`` (``grpo.reference``) and describe it for the run's record.

    TRL 1.16 copies the starting adapter into a frozen ``ref`` adapter and scores the reference with it when that
    adapter exists, else with all adapters disabled (``use_adapter(model, None)``). So ``base`` deletes the copy."""
    if not trainer.beta:
        return NO_KL
    model = trainer.accelerator.unwrap_model(trainer.model)
    if reference == "base" and "ref" in model.peft_config:
        model.delete_adapter("ref")
    return KL_REFERENCES[reference]


def rollout_trainer(trainer_class, config_class, args: dict, spec, scale_by_std: bool = True, advantages=None):
    """A resumable GRPO/RLOO trainer for the run ``spec`` (``thai_grpo.methods.RunSpec``) on the SFT policy, with
    recorded rewards, step metrics, update counts and progress lines, its KL reference set by ``args["reference"]``;
    returns (trainer, its step logger, the checkpoint to resume from or None, the step-metrics file, the KL
    reference's description). The frozen base in ``spec.dtype`` (``base.dtype``)."""
    from datasets import Dataset

    from thai_grpo.models.loading import load_policy, load_tokenizer

    metrics_path, resume_from, examples, empty_thinks = start_step_log(spec.checkpoint_dir)
    seed_everything(spec.seed)
    config = config_class(**trainer_args(args, spec.checkpoint_dir, spec.seed, spec.dtype, spec.training))
    tokenizer = load_tokenizer(spec.base_dir)
    model = load_policy(spec.base_dir, spec.adapter_dir, trainable=True, dtype=spec.dtype)
    recorder = GroupRecorder(config.num_generations, tokenizer)
    names = spec.plan["rewards"]
    funcs = [recorder.wrap(name, f) for name, f in zip(names, reward_functions(names))]
    updates = update_counter(metrics_path.with_name(UPDATES_FILE), spec.run,
                             spec.training.get("max_lost_update_share", 0.0))
    logger = make_step_logger(recorder, metrics_path, scale_by_std=scale_by_std, examples=examples,
                              empty_thinks=empty_thinks, advantages=advantages, updates=updates)
    trainer = resumable(sharing_prompts(trainer_class))(
        model=model, reward_funcs=funcs, args=config, processing_class=tokenizer,
        train_dataset=Dataset.from_list(grpo_records(spec.train_rows, spec.system_prompt)),
        callbacks=[updates, logger, progress_callback(Path(spec.checkpoint_dir).name)])
    updates.watch(trainer)
    scale_float16_losses_on_cpu(trainer)
    kl_reference = use_reference(trainer, args.get("reference", "sft"))
    return trainer, logger, resume_from, metrics_path, kl_reference


def train_with_rollouts(trainer_class, config_class, args: dict, spec, kl_note: str = "", scale_by_std: bool = True,
                        advantages=None) -> dict:
    """The loop GRPO and RLOO share: G completions per prompt graded by the code rewards, every group's
    numbers recorded per step, checkpoints to resume from; save the adapter and the rollouts (``spec.rollouts``),
    return steps, examples and update counts. ``kl_note``: how the method uses the KL, added to the reference's
    description in the record."""
    from thai_grpo.models.loading import count_parameters, weights_dtype

    trainer, logger, resume_from, metrics_path, kl_reference = rollout_trainer(
        trainer_class, config_class, args, spec, scale_by_std, advantages)
    trainer.train(resume_from_checkpoint=resume_from)

    with atomic_directory(spec.out_dir) as tmp:
        trainer.model.save_pretrained(tmp, selected_adapters=["default"], safe_serialization=True)
    if spec.rollouts is not None:
        write_jsonl(spec.rollouts, read_appended_jsonl(metrics_path.with_name(ROLLOUTS_FILE)))
    result = {"steps": read_step_metrics(metrics_path), "example_groups": logger.examples,
              "empty_think_examples": logger.empty_thinks, "parameters": count_parameters(trainer.model),
              "kl_reference": f"{kl_reference}; {kl_note}" if kl_note else kl_reference, "args": args,
              "resolved_args": trainer.args.to_dict(), "reference": args.get("reference", "sft"),
              "optimizer_steps": trainer.state.max_steps, "trl_log_history": trainer.state.log_history,
              "weights_dtype": weights_dtype(trainer.model),
              **update_counts(read_appended_jsonl(metrics_path.with_name(UPDATES_FILE)))}
    clear_checkpoints(spec.checkpoint_dir)
    return result


def train(spec) -> dict:
    """Run GRPO from the SFT adapter (``spec``: ``thai_grpo.methods.RunSpec``), the frozen base in ``spec.dtype``;
    save the trained adapter; return per-step metrics and example groups."""
    from trl import GRPOConfig, GRPOTrainer

    args = spec.plan["grpo"]
    scale_by_std = args.get("scale_rewards", "group") not in ("none", False)
    return {"method": "grpo", **train_with_rollouts(GRPOTrainer, GRPOConfig, args, spec, scale_by_std=scale_by_std)}
