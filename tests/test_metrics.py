import json

import numpy as np
import pytest

from thai_grpo.methods.recorder import batch_metrics, check_group_order, with_trl_logs
from thai_grpo.report.rollouts import browse_steps, example_groups


def hand_built_batch():
    """Three groups of G=4: all-equal (all wrong), mixed, all-equal (all right)."""
    correct = [0, 0, 0, 0] + [1, 0, 1, 0] + [1, 1, 1, 1]
    fmt = [0.3] * 12
    thai = [0.2] * 12
    lengths = [10] * 4 + [20] * 4 + [30] * 4
    return {"correct": correct, "format": fmt, "thai": thai}, lengths


def test_batch_metrics_on_hand_built_groups():
    rewards, lengths = hand_built_batch()
    m = batch_metrics(rewards, lengths, group_size=4)
    assert m["frac_groups_nonzero_std"] == pytest.approx(1 / 3)
    assert m["accuracy"] == pytest.approx(6 / 12)
    assert m["reward_mean"] == pytest.approx(0.5 + 0.5)
    assert m["rewards"] == pytest.approx({"correct": 0.5, "format": 0.3, "thai": 0.2})
    assert m["completion_length_mean"] == 20 and m["generated_tokens"] == 240


def test_all_groups_equal_means_no_learning_signal():
    m = batch_metrics({"correct": [1] * 8}, [5] * 8, group_size=4)
    assert m["frac_groups_nonzero_std"] == 0.0


def test_trl_cross_check_keys_are_renamed():
    merged = with_trl_logs({"a": 1}, {"kl": 0.1, "completions/clipped_ratio": 0.25, "frac_reward_zero_std": 0.5})
    assert merged == {"a": 1, "kl": 0.1, "clipped_ratio": 0.25, "frac_reward_zero_std_trl": 0.5}


def rollout_lines(step, rewards_by_name, advantages, ids):
    """A step's lines of rollouts.jsonl, as the step logger writes them."""
    names = list(rewards_by_name)
    totals = np.sum([rewards_by_name[n] for n in names], axis=0)
    return [{"step": step, "prompt_id": ids[i], "completion": f"s{step}c{i}",
             "rewards": {n: rewards_by_name[n][i] for n in names}, "reward": float(totals[i]),
             "advantage": float(advantages[i])} for i in range(len(ids))]


def test_example_groups_pick_a_mixed_and_an_all_equal_group_with_their_problem():
    from thai_grpo.methods.grpo import group_advantages

    rewards, _ = hand_built_batch()
    totals = np.sum(list(rewards.values()), axis=0)
    rollouts = rollout_lines(1, rewards, group_advantages(totals, 4), ["p1"] * 4 + ["p2"] * 4 + ["p3"] * 4)
    problems = {"p1": {"question": "one?", "answer": 1}, "p2": {"question": "two?", "answer": 2}}
    groups = example_groups(rollouts, 4, max_steps=0, problems=problems)
    assert list(groups) == ["all_equal", "mixed"]
    assert groups["all_equal"]["question"] == "one?" and groups["all_equal"]["advantages"] == [0, 0, 0, 0]
    mixed = groups["mixed"]
    assert (mixed["question"], mixed["gold"], mixed["completions"][0]) == ("two?", 2, "s1c4")
    assert mixed["advantages"][0] > 0 > mixed["advantages"][1]
    assert mixed["rewards"] == [1.5, 0.5, 1.5, 0.5]
    assert mixed["reward_parts"][1] == {"correct": 0, "format": 0.3, "thai": 0.2}


def test_group_order_is_checked():
    check_group_order(["a", "a", "b", "b"], 2)
    with pytest.raises(RuntimeError, match="consecutive"):
        check_group_order(["a", "b", "a", "b"], 2)


def test_a_reused_batch_step_still_records_trls_clip_ratio(tmp_path):
    """num_iterations 2: the second step reuses the batch (no new rewards) and is where the clip can act."""
    from types import SimpleNamespace

    from thai_grpo.methods.recorder import read_step_metrics, recorder

    path = tmp_path / "step_metrics.jsonl"
    logger = recorder(tmp_path, "test", 1.0, group_size=2)
    logger.on_log(None, SimpleNamespace(global_step=2), None, logs={"loss": 0.01, "clip_ratio/region_mean": 0.07})
    logger.on_log(None, SimpleNamespace(global_step=2), None, logs={"train_runtime": 9.0, "train_loss": 0.01})
    assert read_step_metrics(path) == [{"step": 2, "reused_batch": True, "loss": 0.01, "clip_ratio": 0.07}]


def test_browse_steps_spread_evenly_to_the_last():
    assert browse_steps(40) == {10, 20, 30, 40}
    assert browse_steps(3) == {1, 2, 3}  # fewer steps than browse points: each step once
    assert browse_steps(0) == set()


def test_the_report_browses_a_group_of_each_browse_step_beside_the_first_of_each_kind(tmp_path):
    """The step logger writes every completion of every step to rollouts.jsonl; the report picks the first mixed and
    first all-equal group, plus the first group (a mixed one where the step has one) of each of browse_steps' steps."""
    from types import SimpleNamespace

    from thai_grpo.methods.grpo import group_advantages
    from thai_grpo.methods.recorder import recorder

    logger = recorder = recorder(tmp_path, "test", 1.0, group_size=2, advantages=group_advantages)
    for step in range(1, 9):
        mixed = step % 2 == 0  # odd steps: both groups all-equal; even steps: the second group mixed
        correct = [1.0, 1.0, 1.0, 0.0 if mixed else 1.0]
        recorder.batch = {"rewards": {"correct": correct}, "prompts": ["p", "p", "q", "q"], "ids": ["a", "a", "b", "b"],
                          "completions": [f"c{step}-{i}" for i in range(4)], "lengths": [3, 3, 3, 3]}
        logger.on_log(None, SimpleNamespace(global_step=step, max_steps=8), None, logs={"loss": 0.0})
    # every completion of every step in the rollouts file, with its problem, rewards and advantage
    rollouts = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [(r["step"], r["prompt_id"], r["completion"]) for r in rollouts] == [
        (step, problem, f"c{step}-{i}") for step in range(1, 9) for i, problem in enumerate("aabb")]
    examples = example_groups(rollouts, 2, 8, {"b": {"question": "q", "answer": 3}})
    assert examples["all_equal"]["step"] == 1 and examples["mixed"]["step"] == 2
    assert sorted(k for k in examples if k.startswith("step")) == ["step2", "step4", "step6", "step8"]
    for step in (2, 4, 6, 8):  # even steps have a mixed group: it is the one stored
        group = examples[f"step{step}"]
        assert group["step"] == step and group["question"] == "q" and group["rewards"] == [1.0, 0.0]
        assert group["advantages"][0] > 0 > group["advantages"][1]
