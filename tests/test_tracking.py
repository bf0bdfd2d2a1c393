"""training.report_to reaches every trainer: TRL's through their arguments, PPO's own metrics through accelerate's
tracker; none by default."""

from __future__ import annotations

from pathlib import Path

from run_specs import TRAINING, plan, run_spec

from thai_grpo.methods.ppo import start_tracker
from thai_grpo.methods.settings import PPOSettings
from thai_grpo.models.training import TRACKING_PROJECT, trainer_args, tracking_dir


def test_trls_trainers_get_the_tracker_and_the_runs_name(tmp_path, monkeypatch):
    checkpoints = tmp_path / "results" / "checkpoints" / "grpo-grpo"
    assert trainer_args({}, checkpoints, 0)["report_to"] == "none"  # a stage without a training section: SFT
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    assert trainer_args({}, checkpoints, 0, training=TRAINING)["report_to"] == "none"  # the schema's default
    args = trainer_args({}, checkpoints, 0, training={**TRAINING, "report_to": "tensorboard"})
    assert (args["report_to"], args["run_name"], args["project"]) == ("tensorboard", "grpo-grpo", TRACKING_PROJECT)
    # TensorBoard's files outlive the checkpoints: results/tracking/<run>
    assert tracking_dir(checkpoints) == tmp_path / "results" / "tracking" / "grpo-grpo"
    import os

    assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(tracking_dir(checkpoints))


def test_ppo_logs_its_own_metrics_through_accelerates_tracker(tmp_path, monkeypatch):
    import accelerate

    calls = []

    class Recording:
        def __init__(self, log_with=None, project_dir=None):
            calls.append(("init", log_with, Path(project_dir)))

        def init_trackers(self, project, config=None, init_kwargs=None):
            calls.append(("trackers", project, config["batch_size"], init_kwargs))

    monkeypatch.setattr(accelerate, "Accelerator", Recording)
    spec = run_spec(tmp_path / "results" / "checkpoints", "ppo-ppo", "base", "sft", plan("ppo"),
                    training={**TRAINING, "report_to": "wandb"})
    assert start_tracker(run_spec(tmp_path, "ppo", "base", "sft", plan("ppo")), PPOSettings()) is None  # none
    assert isinstance(start_tracker(spec, PPOSettings(batch_size=8)), Recording)
    assert calls == [("init", "wandb", tracking_dir(spec.checkpoint_dir)),
                     ("trackers", TRACKING_PROJECT, 8, {"wandb": {"name": "ckpt-ppo-ppo"}})]
