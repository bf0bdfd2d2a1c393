"""What every trainer records beside its checkpoints: ``step_metrics.jsonl`` (each step's metrics beside TRL's logs),
``updates.jsonl`` (each optimizer update, lost or not) and ``rollouts.jsonl`` (every graded completion); a resume from
checkpoint-N keeps the records up to N. A stage whose lost updates (a float16 step the scaler finally skipped, a
non-finite gradient applied) exceed ``training.max_lost_update_share`` of its steps stops with one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from thai_grpo.core.io import UPDATE_COUNTS, read_appended_jsonl, write_jsonl
from thai_grpo.core.rewards import CORRECT_REWARD, blank_think, completion_text, empty_think, hollow_think

METRICS_FILE, UPDATES_FILE, ROLLOUTS_FILE = "step_metrics.jsonl", "updates.jsonl", "rollouts.jsonl"
# TRL's log keys -> our names; clip_ratio: the share of tokens whose ratio pi/pi_old was clipped (0 when on-policy)
TRL_LOG_KEYS = {"kl": "kl", "completions/clipped_ratio": "clipped_ratio", "clip_ratio/region_mean": "clip_ratio",
                "frac_reward_zero_std": "frac_reward_zero_std_trl", "reward": "reward_mean_trl",
                "learning_rate": "learning_rate", "loss": "loss", "entropy": "entropy"}


def append_lines(path: Path, lines: list[dict]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))


def read_step_metrics(metrics_path: Path, up_to_step: int | None = None) -> list[dict]:
    """The recorded steps (a last line cut short by a kill is dropped, and its step redone)."""
    return [s for s in read_appended_jsonl(metrics_path) if up_to_step is None or s["step"] <= up_to_step]


def start_step_log(checkpoint_dir: str | Path) -> tuple[Path, str | None]:
    """The step-metrics file and the checkpoint to resume from: a fresh start empties the step files a killed run
    left; a resume from checkpoint-N forgets the steps beyond N (they will be redone)."""
    from thai_grpo.models.training import resume_point

    checkpoint_dir = Path(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    resume_from = resume_point(checkpoint_dir)
    step = int(Path(resume_from).name.split("-")[-1]) if resume_from else 0
    for name in (METRICS_FILE, UPDATES_FILE, ROLLOUTS_FILE):
        write_jsonl(checkpoint_dir / name, read_step_metrics(checkpoint_dir / name, step) if resume_from else [])
    return checkpoint_dir / METRICS_FILE, resume_from


def rollout_lines(step: int, prompt_ids, texts, rewards_by_name: dict, advantages, scores=None) -> list[dict]:
    """One line per completion of a step's batch, as TRL's ``log_completions`` table: step, prompt id, completion, each
    reward, their sum, PPO's score where given, and the advantage."""
    totals = total_rewards(rewards_by_name)
    return [{"step": step, "prompt_id": prompt_id, "completion": text,
             "rewards": {name: values[i] for name, values in rewards_by_name.items()}, "reward": float(totals[i]),
             **({} if scores is None else {"score": float(scores[i])}), "advantage": float(advantages[i])}
            for i, (prompt_id, text) in enumerate(zip(prompt_ids, texts))]


def total_rewards(rewards_by_name: dict[str, list[float]]) -> np.ndarray:
    """Each completion's summed reward (all reward weights are 1: the scale lives in the rewards)."""
    return np.sum([np.asarray(v, dtype=float) for v in rewards_by_name.values()], axis=0)


def frac_groups_nonzero_std(rewards, group_size: int, tol: float = 1e-8) -> float:
    """Fraction of groups (``group_size`` consecutive rewards) whose sample std exceeds ``tol``: those that teach."""
    groups = np.asarray(rewards, dtype=float).reshape(-1, group_size)
    return float(np.mean(groups.std(axis=1, ddof=1) > tol))


def share(flags) -> float:
    """The share of true ``flags``; 0.0 for none."""
    flags = list(flags)
    return float(np.mean(flags)) if flags else 0.0


def hollow_think_paid_share(rewards_by_name: dict[str, list[float]], completions: list[str]) -> float:
    """Share of completions a format reward (any named ``format...``) paid for a ``hollow_think`` block: the hack."""
    formats = [np.asarray(v, dtype=float) for name, v in rewards_by_name.items() if name.startswith("format")]
    if not formats:
        return 0.0
    return share(p and hollow_think(c) for p, c in zip(np.sum(formats, axis=0) > 0, completions))


def think_shares(rewards_by_name: dict, completions: list[str]) -> dict:
    """The shares of empty and blank think blocks and of those a format reward paid."""
    return {"empty_think_share": share(map(empty_think, completions)),
            "blank_think_share": share(map(blank_think, completions)),
            "hollow_think_paid_share": hollow_think_paid_share(rewards_by_name, completions)}


def accuracy(rewards_by_name: dict) -> dict:
    """The share of completions the ``correct`` reward pays in full, where it grades."""
    if "correct" not in rewards_by_name:
        return {}
    return {"accuracy": float(np.mean(np.asarray(rewards_by_name["correct"]) >= CORRECT_REWARD))}


def batch_metrics(rewards_by_name: dict[str, list[float]], completion_lengths: list[int], group_size: int,
                  completions: list[str] | None = None) -> dict:
    """Reward, per-function means, group spread, accuracy and length of one generation batch; given the texts, also
    ``think_shares``."""
    totals = total_rewards(rewards_by_name)
    return {"reward_mean": float(totals.mean()),
            "reward_std": float(totals.std(ddof=1)) if totals.size > 1 else 0.0,
            "rewards": {name: float(np.mean(values)) for name, values in rewards_by_name.items()},
            "frac_groups_nonzero_std": frac_groups_nonzero_std(totals, group_size),
            "completion_length_mean": float(np.mean(completion_lengths)),
            "generated_tokens": int(np.sum(completion_lengths)),
            "num_completions": int(totals.size),  # the shares' denominator: the detector's noise margins need it
            **accuracy(rewards_by_name),
            **(think_shares(rewards_by_name, completions) if completions is not None else {})}


def with_trl_logs(metrics: dict, logs: dict) -> dict:
    """Add TRL's own numbers (KL, clipped ratio, its zero-std fraction for cross-checking)."""
    return {**metrics, **{ours: float(logs[theirs]) for theirs, ours in TRL_LOG_KEYS.items() if theirs in logs}}


def check_group_order(prompts: list, group_size: int) -> None:
    """TRL puts the G completions of one prompt next to each other; our group metrics rely on it."""
    for start in range(0, len(prompts), group_size):
        if any(p != prompts[start] for p in prompts[start:start + group_size]):
            raise RuntimeError(f"completions {start}..{start + group_size - 1} do not share one prompt: "
                               "group metrics assume TRL's consecutive-group order")


class LostUpdates(SystemExit):
    """Too many updates lost: a SystemExit, so the job ends with one line and the checkpoints stay for a resume."""


def gradients_finite(parameters) -> bool:
    """Whether every gradient of ``parameters`` (those that have one) is finite."""
    import torch

    grads = [p.grad for p in parameters if p.grad is not None]
    return bool(torch.stack([torch.isfinite(g).all() for g in grads]).all()) if grads else True


def update_record(step: int, skipped: bool, finite: bool, redos: int = 0) -> dict:
    """One optimizer step: lost (finally skipped), its gradients finite, and how often the scaler skipped it before."""
    return {"step": step, "optimizer_step_skipped": bool(skipped), "nonfinite_grad": not finite, "scaler_redos": redos}


def update_counts(records: list[dict]) -> dict:
    """A run's ``optimizer_steps_skipped`` (lost), ``nonfinite_grad_steps`` and ``scaler_redos`` (steps redone)."""
    skipped, nonfinite, redos = UPDATE_COUNTS
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
            f"({counts['optimizer_steps_skipped']} skipped by the float16 loss scaler, "
            f"{counts['nonfinite_grad_steps']} with non-finite gradients), more than "
            f"training.max_lost_update_share={max_share:g} allows: the checkpoints are kept; use bfloat16 (base.dtype) "
            "on a GPU that has it, lower the learning rate, or raise the share and rerun to resume")


def recorder(checkpoint_dir: str | Path, run: str, max_share: float, group_size: int | None = None, tokenizer=None,
             advantages=None):
    """A TrainerCallback recording a TRL run in ``checkpoint_dir`` (made by ``start_step_log``); give it the trainer
    with ``watch``. Each optimizer update: whether its gradients are finite, whether the float16 scaler skipped it
    (``step_replay``), one line in ``updates.jsonl`` and the lost-update check. With ``group_size`` (the GRPO family),
    also each logged step's ``batch_metrics`` and its completions with the method's ``advantages(totals, group_size)``.
    ``wrap`` makes each reward grade ``tokenizer.decode`` of TRL's completion ids: with a response template TRL hands
    over parsed messages, which drop an empty ``<think></think>`` (the lenient format's hack)."""
    from transformers import TrainerCallback

    checkpoint_dir = Path(checkpoint_dir)
    updates_path = checkpoint_dir / UPDATES_FILE

    class Recorder(TrainerCallback):
        def __init__(self):
            self.last, self.batch, self.finite, self.replay = {}, {}, True, None

        def watch(self, trainer):
            if trainer.args.fp16:  # only float16 has a loss scaler to calibrate
                from thai_grpo.methods.step_replay import StepReplay

                self.replay = StepReplay(trainer)
            return trainer

        def wrap(self, name: str, function):
            def recorded(prompts, completions, completion_ids=None, **kwargs):
                if tokenizer is not None and completion_ids is not None:
                    texts = [tokenizer.decode(list(ids), skip_special_tokens=True) for ids in completion_ids]
                else:
                    texts = [completion_text(c) for c in completions]
                values = function(prompts=prompts, completions=texts, completion_ids=completion_ids, **kwargs)
                self.batch.setdefault("rewards", {})[name] = [float(v) for v in values]
                self.batch.update(prompts=[p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)
                                           for p in prompts], completions=texts,
                                  ids=list(kwargs.get("id") or [None] * len(texts)),
                                  lengths=[len(ids) for ids in completion_ids or texts])
                return values

            recorded.__name__ = name
            return recorded

        def on_step_begin(self, args, state, control, **kwargs):
            if self.replay is not None:
                self.replay.batches = []

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            self.finite = gradients_finite(p for p in model.parameters() if p.requires_grad)
            if self.replay is not None:
                self.replay.note_scale()

        def on_optimizer_step(self, args, state, control, model=None, **kwargs):
            while self.replay is not None and self.replay.redo_skipped(model):
                self.finite = gradients_finite(p for p in model.parameters() if p.requires_grad)

        def on_step_end(self, args, state, control, **kwargs):
            skipped, redos = (False, 0) if self.replay is None else (self.replay.skipped(), self.replay.redos)
            self.last = update_record(state.global_step, skipped, self.finite, redos)
            append_lines(updates_path, [self.last])
            check_lost_updates(run, read_appended_jsonl(updates_path), state.max_steps, max_share)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if group_size is None or not logs or ("reward" not in logs and "loss" not in logs):
                return  # not a GRPO-family training step's log (e.g. the run's closing summary)
            step, flags = state.global_step, {k: v for k, v in self.last.items() if k != "step"}
            batch, self.batch = self.batch, {}
            if not batch:  # a reused generation batch (num_iterations > 1): no new rewards, but TRL's clip ratio
                append_lines(checkpoint_dir / METRICS_FILE, [{"step": step, "reused_batch": True,
                                                              **with_trl_logs({}, logs), **flags}])
                return
            check_group_order(batch["prompts"], group_size)
            metrics = batch_metrics(batch["rewards"], batch["lengths"], group_size, batch["completions"])
            append_lines(checkpoint_dir / METRICS_FILE, [{"step": step, **with_trl_logs(metrics, logs), **flags}])
            own = advantages(total_rewards(batch["rewards"]), group_size)
            append_lines(checkpoint_dir / ROLLOUTS_FILE,
                         rollout_lines(step, batch["ids"], batch["completions"], batch["rewards"], own))

    return Recorder()
