"""GRPO's objective as the chapter writes it (thai_grpo.methods.objective) against what TRL's GRPOTrainer computes on
a real batch: the pipeline's own trainer (``rollout_trainer``: the shipped base and SFT adapter, the code rewards, the
config's grpo section) generates, grades and scores one batch, and the module must give TRL's advantages, its loss
and the loss's gradient in the per-token log-probs, for the chapter's settings and for Dr.GRPO's. The same check fails
when the module's std division or k3 form is changed, and when the trainer is given other settings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from run_specs import run_spec

import thai_grpo.methods.objective as objective
from thai_grpo.workflow import load_config_files, variant_plan

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "assets/tiny-base"
# One optimizer step of a small batch: 4 prompts x 4 completions, the rest as config/config.yaml's grpo section. The
# reference is the chapter's (the base, adapter disabled): with TRL's copy of the SFT adapter the first step's policy
# is its own reference and k3 is 0 on every token, which no change of the k3 form would show.
SMALL = {"num_generations": 4, "per_device_train_batch_size": 16, "max_completion_length": 64, "max_steps": 1,
         "save_steps": 100, "reference": "base"}
SETTINGS = {"chapter": ("grpo", {}), "dr_grpo": ("dr_grpo", {}),
            "scale_rewards batch": ("grpo", {"scale_rewards": "batch"}),
            "loss_type bnpo": ("grpo", {"loss_type": "bnpo"}), "loss_type dapo": ("grpo", {"loss_type": "dapo"}),
            "use_bias_correction_kl": ("grpo", {"use_bias_correction_kl": True})}


def capturing(trainer_class):
    """``trainer_class`` keeping, of its one loss computation, TRL's inputs (rewards, advantages, reference log-probs,
    mask), the policy's per-token log-probs, the loss and its gradient in those log-probs."""

    class Capturing(trainer_class):
        captured: dict = {}

        def _calculate_rewards(self, *args, **kwargs):
            rewards = super()._calculate_rewards(*args, **kwargs)
            self.captured["rewards"] = (rewards * self.reward_weights.unsqueeze(0)).sum(dim=1).detach().clone()
            return rewards

        def _generate_and_score_completions(self, *args, **kwargs):
            batch = super()._generate_and_score_completions(*args, **kwargs)
            self.captured.update(generated=torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1),
                                 trl_advantages=batch["advantages"].detach().clone())
            return batch

        def _compute_loss(self, model, inputs):
            own = self._get_per_token_logps_and_entropies  # the pipeline's pass (shared prompts), whichever it is
            seen = {}

            def recorded(*args, **kwargs):
                logps, *rest = own(*args, **kwargs)
                seen["logps"] = logps
                return (logps, *rest)

            self._get_per_token_logps_and_entropies = recorded
            try:
                loss = super()._compute_loss(model, inputs)
            finally:
                del self._get_per_token_logps_and_entropies
            (gradient,) = torch.autograd.grad(loss, seen["logps"], retain_graph=True)
            old = inputs.get("old_per_token_logps")
            self.captured.update(
                logps=seen["logps"].detach().clone(), gradient=gradient.clone(), loss=loss.detach().clone(),
                old=None if old is None else old.detach().clone(), ref=inputs["ref_per_token_logps"].detach().clone(),
                mask=inputs["completion_mask"].detach().float(), accumulation=self.current_gradient_accumulation_steps,
                order=batch_order(self.captured["generated"],
                                  torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)))
            return loss

    return Capturing


def batch_order(generated: torch.Tensor, shuffled: torch.Tensor) -> list[int]:
    """order[k] = the row of the generation batch that is row k of the loss's batch (TRL shuffles the generation
    batch before it splits it into steps); equal rows (the same completion sampled twice) share their rewards."""
    unused = list(range(generated.size(0)))
    order = []
    for row in shuffled:
        match = next(j for j in unused if torch.equal(generated[j], row))
        unused.remove(match)
        order.append(match)
    return order


def run_one_batch(variant: str, changes: dict, rows, tmp_path) -> dict:
    """One training step of the pipeline's GRPO trainer with ``variant``'s settings (config/config.yaml), ``SMALL``
    and ``changes``; returns what it captured and the settings it ran with."""
    from trl import GRPOConfig, GRPOTrainer

    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.methods.grpo import rollout_trainer

    config = load_config_files([str(REPO / "config/config.yaml")], str(REPO / "config/schema.yaml"))
    plan = variant_plan(config, variant)
    args = {**plan["grpo_args"], **SMALL, **changes}
    trainer_class = capturing(GRPOTrainer)
    trainer_class.captured = {}
    spec = run_spec(tmp_path, "grpo", SHIPPED / "base", SHIPPED / "sft_adapter", plan, rows,
                    system_prompt=SYSTEM_PROMPT)
    trainer, *_ = rollout_trainer(trainer_class, GRPOConfig, args, spec)
    trainer.train()
    return {**trainer_class.captured, "args": args}


@pytest.fixture(scope="module")
def rows():
    from thai_grpo.data.problems import normalize_rows
    from thai_grpo.data.synthetic import generate_problems

    found, _ = normalize_rows(generate_problems(4, seed=11, max_operand=8), "translated_question",
                              "translated_answer")
    return found


@pytest.fixture(scope="module")
def batches(rows, tmp_path_factory):
    cache = {}

    def batch(name):
        if name not in cache:
            variant, changes = SETTINGS[name]
            cache[name] = run_one_batch(variant, changes, rows, tmp_path_factory.mktemp(name.replace(" ", "_")))
        return cache[name]

    return batch


def objectives(captured: dict, settings: dict) -> dict:
    """The module's advantages, loss and gradient on the captured batch, for the chapter's objective under
    ``settings`` (the grpo section the module is told about)."""
    scale_by_std = settings["scale_rewards"] != "none"
    advantages = objective.group_advantages(captured["rewards"], settings["num_generations"], scale_by_std)
    logps = captured["logps"].clone().requires_grad_(True)
    old = logps.detach() if captured["old"] is None else captured["old"]  # on-policy: pi_old is pi_theta, detached
    loss = objective.grpo_loss(logps, old, captured["ref"], advantages[captured["order"]], captured["mask"],
                               settings["beta"],
                               settings["epsilon"], settings["loss_type"], settings["max_completion_length"])
    (gradient,) = torch.autograd.grad(loss, logps)
    return {"advantages": advantages, "loss": loss.detach(), "gradient": gradient}


def assert_same_as_trl(captured: dict, settings: dict) -> None:
    ours = objectives(captured, settings)
    assert captured["accumulation"] == 1  # TRL divides the loss by the accumulation steps; one here
    torch.testing.assert_close(ours["advantages"], captured["trl_advantages"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours["loss"], captured["loss"], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(ours["gradient"], captured["gradient"], atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("name", ["chapter", "dr_grpo"])
def test_the_objective_gives_trls_advantages_loss_and_gradient_on_a_real_batch(batches, name):
    captured = batches(name)
    settings = captured["args"]
    rewards = captured["rewards"].numpy()
    groups = rewards.reshape(-1, settings["num_generations"])
    # the batch can tell the settings apart: a group whose rewards differ (with a std not 1), tokens whose
    # reference and policy differ, completions of different lengths
    mixed = np.ptp(groups, axis=1) > 0
    assert mixed.any() and (np.abs(groups[mixed].std(axis=1, ddof=1) - 1) > 0.1).any()
    assert (captured["ref"] - captured["logps"]).abs().max() > 1e-3
    assert len(set(captured["mask"].sum(dim=1).tolist())) > 1
    assert_same_as_trl(captured, settings)
    # called with numpy, as the figures and the per-step metrics call it, the same advantages
    np.testing.assert_allclose(objective.group_advantages(rewards, settings["num_generations"],
                                                          settings["scale_rewards"] != "none"),
                               captured["trl_advantages"].numpy(), atol=1e-5, rtol=1e-5)


def without_std_division(rewards, group_size, scale_by_std=True, eps=objective.STD_EPS):
    groups = rewards.reshape(-1, group_size)
    return (groups - groups.mean(dim=1, keepdim=True)).reshape(-1)


def with_population_std(rewards, group_size, scale_by_std=True, eps=objective.STD_EPS):
    groups = rewards.reshape(-1, group_size)
    centered = groups - groups.mean(dim=1, keepdim=True)
    return (centered / (groups.std(dim=1, keepdim=True, correction=0) + eps)).reshape(-1)


MUTATIONS = {
    "advantages without the std division": ("group_advantages", without_std_division),
    "advantages divided by the population std": ("group_advantages", with_population_std),
    "k1 for k3": ("k3", lambda logp, ref_logp: logp - ref_logp),
    "k3 of the inverted ratio pi_theta / pi_ref": ("k3", lambda logp, ref_logp: torch.expm1(logp - ref_logp)
                                                   - (logp - ref_logp)),
    "k2 = (log x)^2 / 2 for k3": ("k3", lambda logp, ref_logp: (ref_logp - logp) ** 2 / 2),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_a_changed_objective_no_longer_matches_trl(batches, monkeypatch, mutation):
    name, replacement = MUTATIONS[mutation]
    captured = batches("chapter")  # trained first: the step log computes its advantages with the module's own
    monkeypatch.setattr(objective, name, replacement)
    with pytest.raises(AssertionError, match="not close"):
        assert_same_as_trl(captured, captured["args"])


@pytest.mark.parametrize("name", ["dr_grpo", "scale_rewards batch", "loss_type bnpo", "loss_type dapo",
                                  "use_bias_correction_kl"])
def test_a_trainer_given_other_settings_no_longer_matches_the_chapters_objective(batches, name):
    """On-policy the ratio is 1 in value, so use_bias_correction_kl (k3 times the ratio) changes the gradient only:
    the comparison of gradients is what tells it apart."""
    chapter = batches("chapter")["args"]
    with pytest.raises(AssertionError, match="not close"):
        assert_same_as_trl(batches(name), chapter)
