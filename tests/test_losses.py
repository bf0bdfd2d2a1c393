"""The loss-family study: each variant's settings reach TRL's GRPOConfig as written, `snakemake losses` schedules
exactly the loss variants and grpo at each training seed, and the verdicts follow hand-made scores."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from markupsafe import escape
from configs import config_of
from run_specs import run_spec
from workflow import copy_workflow, scheduled_jobs
from workflow import run_snakemake as snakemake

from thai_grpo.core.config import OURS, ConfigError
from thai_grpo.workflow import check_config, check_method_fields, check_trainer_fields, variant_plan
from thai_grpo.workflow import LOSS_BASELINE, loss_runs, seed_runs
from thai_grpo_studies.loss_stats import loss_study, metric_names, per_problem
from thai_grpo.evaluation.passk import pass_at_k
from thai_grpo.evaluation.scoring import holm_adjust
from thai_grpo.methods import train_variant

REPO = Path(__file__).resolve().parents[1]
EXPECTED = ["trl_defaults", "dapo", "bnpo", "gspo", "clip_higher", "no_kl", "batch_scaling", "normalize_then_sum"]
# The GRPOConfig fields that decide the loss (and the advantages it weighs): what trl_defaults must take from TRL.
LOSS_FIELDS = ("loss_type", "beta", "epsilon", "epsilon_high", "delta", "num_iterations", "importance_sampling_level",
               "scale_rewards", "multi_objective_aggregation", "mask_truncated_completions", "top_entropy_quantile",
               "entropy_coef", "reward_weights", "steps_per_generation", "use_bias_correction_kl",
               "off_policy_mask_threshold")


def load(name="config.yaml"):
    return config_of() if name == "config.yaml" else config_of(name)


def built_config(plan: dict, monkeypatch, tmp_path):
    """The GRPOConfig the train script builds for ``plan``: train_variant -> train_grpo -> the rollout loop, stopped
    where the loop would build the trainer (``rollout_trainer`` does ``config_class(**trainer_args(...))``)."""
    import thai_grpo.methods.grpo as grpo
    from thai_grpo.models.training import trainer_args

    built = {}

    def stop_before_training(trainer_class, config_class, args, spec, *rest, **kwargs):
        built["config"] = config_class(**trainer_args(args, spec.checkpoint_dir, spec.seed, spec.dtype))
        return {"steps": []}

    monkeypatch.setattr(grpo, "train_with_rollouts", stop_before_training)
    train_variant(run_spec(tmp_path, "out", "base", "sft", plan, seed=7, checkpoint_dir=tmp_path / "ckpt"))
    return built["config"]


# --------------------------------------------------------------------------- config
def test_the_study_has_the_eight_loss_variants_and_they_pass_every_config_check():
    config = load()
    assert list(loss_runs(config))[1:] == EXPECTED
    check_config(config)
    check_trainer_fields(config)  # every field a TRL 1.16 GRPOConfig field: a misspelling would raise here
    check_method_fields(config)
    assert all(variant_plan(config, v)["group"] == "losses" and variant_plan(config, v)["method"] == "grpo"
               for v in EXPECTED)


def test_a_misspelt_loss_field_is_refused_before_any_job():
    config = load()
    config["variants"]["dapo"]["grpo"]["epsilon_hi"] = 0.28
    with pytest.raises(ConfigError, match=r"variants.dapo.grpo.epsilon_hi is not a field of TRL GRPOConfig"):
        check_trainer_fields(config)


@pytest.mark.parametrize("variant", ["grpo", *EXPECTED])
def test_each_variants_settings_reach_grpoconfig_as_written(variant, monkeypatch, tmp_path):
    config = load()
    built = built_config(variant_plan(config, variant), monkeypatch, tmp_path)
    written = {**config["grpo"], **config["variants"][variant].get("grpo", {})}
    for field, value in written.items():
        if field not in OURS:  # ours, not GRPOConfig's (the KL reference)
            assert getattr(built, field) == value, (variant, field)
    assert built.seed == 7 and built.output_dir == str(tmp_path / "ckpt")


def test_trl_defaults_is_what_trls_own_defaults_give_for_every_loss_field(monkeypatch, tmp_path):
    from trl import GRPOConfig

    from thai_grpo.models.training import trainer_args

    config = load()
    sizes = {k: v for k, v in config["grpo"].items() if k not in LOSS_FIELDS}  # batch, lengths, steps, schedule
    trl = GRPOConfig(**trainer_args(sizes, tmp_path / "ckpt", 7))  # TRL's own defaults for every loss field
    built = built_config(variant_plan(config, "trl_defaults"), monkeypatch, tmp_path)
    loss_fields = lambda config: {field: getattr(config, field) for field in LOSS_FIELDS}  # noqa: E731
    assert loss_fields(built) == loss_fields(trl)
    chapter = built_config(variant_plan(config, "grpo"), monkeypatch, tmp_path)
    differs = {field for field in LOSS_FIELDS if getattr(chapter, field) != getattr(trl, field)}
    # the chapter departs from TRL's loss in exactly these: its loss, its KL weight and its plain k3
    assert differs == {"loss_type", "beta", "use_bias_correction_kl"}


def test_the_variants_that_need_an_off_policy_ratio_get_a_second_pass():
    config = load()
    for variant in ("gspo", "clip_higher"):  # at num_iterations 1 the ratio is exactly 1: their clip could not act
        assert variant_plan(config, variant)["grpo_args"]["num_iterations"] == 2
    assert variant_plan(config, "gspo")["grpo_args"]["importance_sampling_level"] == "sequence"


def test_loss_runs_are_the_seed_studys_grpo_runs_and_every_variant_at_each_seed():
    config = load()
    runs = loss_runs(config)
    assert list(runs) == [LOSS_BASELINE, *EXPECTED]
    assert runs["grpo"] == seed_runs(config)["grpo"] == ["grpo", "grpo-seed1", "grpo-seed2"]  # shared, not copied
    assert runs["gspo"] == ["gspo", "gspo-seed1", "gspo-seed2"]
    del config["variants"]["grpo"]
    with pytest.raises(ConfigError, match="variants.grpo is missing"):
        loss_runs(config)


# --------------------------------------------------------------------------- the DAG
def test_the_losses_target_schedules_exactly_the_loss_variants_and_grpo_at_each_seed(tmp_path):
    workdir = copy_workflow(tmp_path / "wf")
    dry = snakemake(workdir, "losses", "-n", "--configfile", "config/smoke.yaml")
    jobs = scheduled_jobs(dry)
    config = load()
    seeds = config["seeds"]["training"]
    expected = {f"{v}" if s == config["seed"] else f"{v}-seed{s}" for v in ["grpo", *EXPECTED] for s in seeds}
    out = dry.stdout + dry.stderr
    trained = set(re.findall(r"results/runs/([^/\s,]+)/train\.json", out))
    sampled = set(re.findall(r"results/eval/([^/\s,]+)/scores\.json", out))
    assert trained == sampled == expected
    assert jobs["train"] == jobs["sample"] == jobs["score"] == len(expected) == 27
    assert jobs["loss_results"] == jobs["loss_report"] == jobs["losses"] == 1
    assert not {"dr_grpo", "rloo", "ppo", "g2", "two_passes"} & {run.split("-seed")[0] for run in trained}


# --------------------------------------------------------------------------- statistics on hand-made scores
N = 4


def scores(correct: list[int], greedy: list[int] | None = None) -> dict:
    """A scores.json of n = 4 samples per problem with the given correct counts."""
    return {"n_samples": N, "num_problems": len(correct), "per_problem_correct": list(correct),
            "per_problem_greedy": list(greedy if greedy is not None else [int(c >= 2) for c in correct]),
            "pass@1": {"estimate": float(np.mean(correct)) / N}, "pass@4": {"estimate": 0.0},
            "greedy_accuracy": {"estimate": 0.0}}


def make_runs(rates: dict[str, list[list[int]]]) -> dict:
    return {name: [{"run": name if i == 0 else f"{name}-seed{i}", "seed": [42, 1, 2][i], "scores": scores(c)}
                   for i, c in enumerate(per_seed)] for name, per_seed in rates.items()}


RNG = np.random.default_rng(0)
BASE = [RNG.integers(0, 3, 60).tolist() for _ in range(3)]  # grpo: ~25% solve rate, 60 problems, 3 seeds
NOISY = [(np.asarray(b) + RNG.integers(-1, 2, 60) * (np.asarray(b) > 0)).tolist() for b in BASE]  # grpo +- noise
BETTER = [np.minimum(np.asarray(b) + 2, N).tolist() for b in BASE]  # +2 correct of 4 on every problem, every seed


def test_metrics_are_every_scored_pass_at_k_then_greedy_and_per_problem_values_follow_the_formula():
    s = scores([0, 1, 4, 2])
    assert metric_names(s) == ["pass@1", "pass@4", "greedy"]
    assert per_problem(s, "pass@1").tolist() == [0.0, 0.25, 1.0, 0.5]
    assert per_problem(s, "pass@4").tolist() == [pass_at_k(N, c, 4) for c in (0, 1, 4, 2)] == [0.0, 1.0, 1.0, 1.0]
    assert per_problem(s, "greedy").tolist() == [0.0, 0.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="unknown metric"):
        per_problem(s, "mean_reward")


def test_a_real_gap_is_higher_and_a_noise_level_one_is_not():
    study = loss_study(make_runs({"grpo": BASE, "noisy": NOISY, "better": BETTER}))
    versus = {t["variant"]: t for t in study["versus"]["pass@1"]}
    assert set(versus) == {"noisy", "better"}  # against grpo only: no noisy-vs-better pair
    assert versus["better"]["verdict"] == "higher" and versus["better"]["ci_low"] > 0
    assert versus["noisy"]["verdict"] in ("not_resolved", "equivalent")
    assert versus["noisy"]["ci_low"] < 0 < versus["noisy"]["ci_high"]
    expected = np.mean(BETTER) / N - np.mean(BASE) / N
    assert versus["better"]["mean_diff"] == pytest.approx(expected)
    assert study["variants"]["better"]["metrics"]["pass@1"]["per_seed"] == pytest.approx(
        [np.mean(b) / N for b in BETTER])


def test_the_family_is_the_variants_against_grpo_with_dunnett_and_is_named_per_metric():
    study = loss_study(make_runs({"grpo": BASE, "noisy": NOISY, "better": BETTER}))
    for metric in ("pass@1", "pass@4", "greedy"):
        tests = study["versus"][metric]
        assert all(t["p_value"] <= t["p_holm"] <= min(1.0, 2 * t["p_value"]) + 1e-3 for t in tests)  # Dunnett <= Bonferroni
        assert [t["tost_p_holm"] for t in tests] == pytest.approx(holm_adjust([t["tost_p"] for t in tests]))
        prefix = "" if metric == "pass@1" else "secondary: "
        assert study["families"][metric] == f"{prefix}Dunnett over 2 contrasts ({metric}: each loss variant against grpo)"
        assert all(t["family"] == ("many_to_one" if metric == "pass@1" else "secondary") for t in tests)


def test_every_variant_needs_grpo_and_the_same_seeds():
    with pytest.raises(ValueError, match="with 'grpo' at the same seeds"):
        loss_study(make_runs({"noisy": NOISY, "better": BETTER}))
    with pytest.raises(ValueError, match="one run at each training seed"):
        loss_study(make_runs({"grpo": BASE, "better": BETTER[:2]}))
    shuffled = make_runs({"grpo": BASE, "better": BETTER})
    shuffled["better"][1]["seed"], shuffled["better"][2]["seed"] = 2, 1  # same count, other seeds: not paired
    with pytest.raises(ValueError, match=r"better: runs at seeds \[42, 2, 1\], grpo at \[42, 1, 2\]"):
        loss_study(shuffled)


# --------------------------------------------------------------------------- results.json and the page
def train_record(kl: float | None, clip: float, length: float, cut: float, reused: bool = False) -> dict:
    """train.json of a 4-step run: a generation step then (two passes) a reused one, twice."""
    steps, history = [], []
    for step in (1, 2, 3, 4):
        again = reused and step % 2 == 0
        record = {"step": step, "clip_ratio": clip if again else 0.0, "accuracy": 0.5, **({"kl": kl} if kl else {})}
        if again:
            record["reused_batch"] = True
        else:
            record.update(completion_length_mean=length + step, clipped_ratio=cut)
        steps.append(record)
        history.append({"step": step, "loss": 0.1, "clip_ratio/high_mean": clip / 2 if again else 0.0})
    return {"steps": steps, "trl_log_history": history}


def test_results_carry_changes_seed_mean_curves_health_and_cost(tmp_path):
    from thai_grpo_studies.losses import loss_results, render_losses_report

    config = load()
    runs = make_runs({"grpo": BASE, "no_kl": NOISY, "clip_higher": BETTER})
    trains = {}
    for i, run in enumerate(["grpo", "grpo-seed1", "grpo-seed2"]):
        trains[run] = train_record(0.01 * (i + 1), 0.0, 40.0, 0.1)
    for run in ["no_kl", "no_kl-seed1", "no_kl-seed2"]:
        trains[run] = train_record(None, 0.0, 40.0, 0.95)  # cut at the budget: a truncation failure
    for i, run in enumerate(["clip_higher", "clip_higher-seed1", "clip_higher-seed2"]):
        trains[run] = train_record(0.02, 0.1 * (i + 1), 40.0, 0.1, reused=True)
    plans = {v: {**variant_plan(config, v), "description": config["variants"][v].get("description", "")}
             for v in runs}
    seconds = {f"{kind}-{run}": 10.0 for kind in ("train", "sample", "score") for run in trains}
    del seconds["score-no_kl-seed2"]
    results = loss_results(runs, trains, plans, seconds)

    assert results["variants"]["no_kl"]["changes"] == {"beta": [0.04, 0.0]}
    assert results["variants"]["clip_higher"]["changes"] == {"epsilon_high": [None, 0.28], "num_iterations": [None, 2]}
    grpo_curves = results["variants"]["grpo"]["curves"]
    assert [c["kl"] for c in grpo_curves] == pytest.approx([0.02] * 4)  # the mean of 0.01, 0.02, 0.03
    assert all(c["kl"] is None for c in results["variants"]["no_kl"]["curves"])  # beta 0: TRL logs no KL
    clip = results["variants"]["clip_higher"]["curves"]
    assert [c["clip_ratio"] for c in clip] == pytest.approx([0.0, 0.2, 0.0, 0.2])
    assert [c["clip_high"] for c in clip] == pytest.approx([0.0, 0.1, 0.0, 0.1])
    assert clip[1]["completion_length_mean"] is None and clip[2]["completion_length_mean"] == pytest.approx(43.0)
    assert results["variants"]["no_kl"]["flagged"] == ["no_kl", "no_kl-seed1", "no_kl-seed2"]
    assert results["variants"]["grpo"]["flagged"] == []
    assert results["variants"]["grpo"]["cost"]["sum_seconds"] == 90.0
    assert results["variants"]["no_kl"]["cost"]["missing"] == ["score-no_kl-seed2"]
    assert results["cost"]["sum_seconds"] == 260.0
    assert results["training_seeds"] == [42, 1, 2] and results["num_problems"] == 60
    sentence = results["sentences"]["pass@1"]["clip_higher"]
    assert sentence.startswith("clip_higher - grpo: +") and sentence.endswith("clip_higher higher than grpo.")

    html = render_losses_report(results, tmp_path / "figures", REPO / "report")
    assert str(escape(sentence)) in html and "not logged (beta 0)" in html and "FLAGGED" in html
    assert (tmp_path / "figures" / "losses_curves.png").is_file() and "data:image/png;base64," in html
    assert "Undefined" not in html and "Dunnett over 2 contrasts (pass@1: each loss variant against grpo)" in html


def test_the_main_report_shows_the_studys_verdicts_once_built():
    from thai_grpo_studies.losses import main_report_rows

    assert main_report_rows({}) is None
    results = loss_study(make_runs({"grpo": BASE, "better": BETTER}))
    results["variants"]["better"]["description"] = "a better loss"
    context = main_report_rows({**results, "training_seeds": [42, 1, 2]})
    assert context["metric"] == "pass@1" and context["seeds"] == [42, 1, 2]
    rows = {r["name"]: r for r in context["rows"]}
    assert rows["grpo"]["test"] is None and rows["better"]["verdict"] == "higher"
    assert rows["better"]["description"] == "a better loss"
