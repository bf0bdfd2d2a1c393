"""PPO's pieces against brute force: per-token rewards (score on the last real token, missing-EOS penalty), GAE,
whitening, the clipped policy and value losses, the prompt order; and the reward model's data check."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from thai_grpo.methods.ppo import (completion_mask, explained_variance, gae, masked_whiten, per_token_rewards,
                                   policy_loss, prompt_batch, scores_with_penalty, value_loss)
from thai_grpo.methods.settings import ppo_settings, PPOSettings


def brute_gae(rewards, values, length, gamma, lam):
    """The textbook recursion written out for one completion of ``length`` real tokens, V after the end = 0."""
    advantages = [0.0] * length
    for t in range(length):
        total = 0.0
        for k in range(t, length):
            next_value = values[k + 1] if k + 1 < length else 0.0
            delta = rewards[k] + gamma * next_value - values[k]
            total += (gamma * lam) ** (k - t) * delta
        advantages[t] = total
    return advantages


@pytest.mark.parametrize("gamma, lam", [(1.0, 0.95), (0.9, 0.8), (1.0, 1.0), (0.99, 0.0)])
def test_gae_matches_the_brute_force_sum_including_a_one_token_completion(gamma, lam):
    rng = np.random.default_rng(0)
    lengths = [5, 1, 3]  # the middle completion is a single token (its EOS)
    rewards = torch.tensor(rng.normal(size=(3, 5)), dtype=torch.float64)
    values = torch.tensor(rng.normal(size=(3, 5)), dtype=torch.float64)
    mask = completion_mask(lengths, 5)
    advantages, returns = gae(rewards * mask, values, mask, gamma, lam)
    for row, length in enumerate(lengths):
        expected = brute_gae(rewards[row].tolist(), values[row].tolist(), length, gamma, lam)
        assert advantages[row, :length].tolist() == pytest.approx(expected)
        assert advantages[row, length:].abs().sum() == 0 and returns[row, length:].abs().sum() == 0
        expected_returns = advantages[row, :length] + values[row, :length]
        assert returns[row, :length].tolist() == pytest.approx(expected_returns.tolist())
    # one token: A = r - V (nothing follows), whatever gamma and lambda
    assert advantages[1, 0].item() == pytest.approx(rewards[1, 0].item() - values[1, 0].item())


def test_gae_with_gamma_one_and_lambda_one_is_the_reward_to_go_minus_the_value():
    rewards = torch.tensor([[0.1, -0.2, 0.3, 1.0]])
    values = torch.tensor([[0.5, 0.4, 0.2, 0.9]])
    advantages, returns = gae(rewards, values, completion_mask([4], 4), 1.0, 1.0)
    to_go = torch.flip(torch.cumsum(torch.flip(rewards, [1]), 1), [1])
    assert torch.allclose(advantages, to_go - values) and torch.allclose(returns, to_go)


def test_score_lands_on_the_last_real_token_and_kl_everywhere_before():
    logprobs = torch.tensor([[-1.0, -2.0, -0.5, -3.0], [-1.0, -1.0, -1.0, -1.0]])
    ref = torch.tensor([[-1.5, -1.0, -0.5, -9.0], [-2.0, -1.0, -1.0, -1.0]])
    rewards, k1 = per_token_rewards(logprobs, ref, [3, 1], torch.tensor([2.0, -1.0]), kl_coef=0.1)
    assert torch.allclose(k1, torch.tensor([[0.5, -1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]))
    # row 0: 3 real tokens, the score on index 2 (TRL put it on index 3, one past the EOS), nothing on index 3
    assert rewards[0].tolist() == pytest.approx([-0.05, 0.1, 2.0, 0.0])
    assert rewards[1].tolist() == pytest.approx([-0.1 - 1.0, 0.0, 0.0, 0.0])


def test_missing_eos_penalty_hits_only_completions_cut_at_the_budget():
    scores = scores_with_penalty([0.5, 0.5, -0.2], torch.tensor([True, False, False]), 1.0)
    assert scores.tolist() == pytest.approx([0.5, -0.5, -1.2])
    assert scores_with_penalty([0.5], torch.tensor([False]), None).tolist() == [0.5]


def test_whitening_uses_real_tokens_only_and_leaves_padding_zero():
    values = torch.tensor([[1.0, 2.0, 3.0, 100.0], [4.0, 5.0, -7.0, -7.0]])
    mask = completion_mask([3, 2], 4)
    white = masked_whiten(values, mask)
    real = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    expected = (real - real.mean()) / np.sqrt(real.var(ddof=1) + 1e-8)
    assert white[mask].tolist() == pytest.approx(expected.tolist(), rel=1e-5)
    assert white[~mask].abs().sum() == 0


def test_clipped_surrogate_on_hand_built_ratios():
    old = torch.zeros(1, 4)
    new = torch.log(torch.tensor([[1.5, 0.5, 1.1, 0.7]]))  # ratios 1.5, 0.5, 1.1, 0.7
    advantages = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    loss, clip_fraction, _ = policy_loss(new, old, advantages, torch.ones(1, 4, dtype=torch.bool), 0.2)
    # A>0, r=1.5 -> min(1.5, 1.2) = 1.2 (clipped); A>0, r=0.5 -> 0.5 (the clip never lifts a loss);
    # A<0, r=1.1 -> -1.1 (inside); A<0, r=0.7 -> max(-0.7, -0.8)... as losses: max(0.7, 0.8) = 0.8 (clipped)
    assert loss.item() == pytest.approx(np.mean([-1.2, -0.5, 1.1, 0.8]))
    assert clip_fraction.item() == pytest.approx(0.5)
    masked, _, _ = policy_loss(new, old, advantages, torch.tensor([[True, True, False, False]]), 0.2)
    assert masked.item() == pytest.approx(np.mean([-1.2, -0.5]))


def test_clipped_value_loss_on_hand_built_values():
    old = torch.tensor([[0.0, 0.0, 0.0]])
    new = torch.tensor([[0.5, 0.1, -0.5]])
    returns = torch.tensor([[1.0, 1.0, 0.0]])
    loss, clip_fraction = value_loss(new, old, returns, torch.ones(1, 3, dtype=torch.bool), 0.2)
    # V'=0.5 -> clipped 0.2: max(0.25, 0.64) = 0.64; V'=0.1 inside: 0.81; V'=-0.5 -> -0.2: max(0.25, 0.04) = 0.25
    assert loss.item() == pytest.approx(0.5 * np.mean([0.64, 0.81, 0.25]))
    assert clip_fraction.item() == pytest.approx(1 / 3)


def test_explained_variance():
    returns = torch.tensor([[1.0, 2.0, 3.0, 50.0]])
    mask = completion_mask([3], 4)
    assert explained_variance(returns, returns, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full((1, 4), 2.0), returns, mask) == pytest.approx(0.0)


def test_prompt_batches_cover_every_row_once_per_pass_whatever_step_a_run_starts_from():
    batches = [prompt_batch(10, 5, step, seed=3) for step in range(1, 5)]
    assert sorted(batches[0] + batches[1]) == list(range(10)) and sorted(batches[2] + batches[3]) == list(range(10))
    assert batches[0] + batches[1] != batches[2] + batches[3]  # a new order each pass
    assert prompt_batch(10, 5, 3, seed=3) == batches[2]


def test_settings_take_grpo_rollouts_then_the_variant():
    settings = ppo_settings({"temperature": 1.0, "max_completion_length": 80}, {"num_ppo_epochs": 2})
    assert (settings.temperature, settings.max_completion_length, settings.num_ppo_epochs) == (1.0, 80, 2)
    assert PPOSettings().kl_coef == 0.05 and PPOSettings().lam == 0.95 and PPOSettings().cliprange_value == 0.2


def adapter_with_dropout(base_dir, target, dropout: float):
    from peft import LoraConfig, get_peft_model

    from thai_grpo.models.loading import load_base_model

    torch.manual_seed(0)
    model = get_peft_model(load_base_model(base_dir), LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8,
                                                                 lora_dropout=dropout,
                                                                 target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():  # PEFT starts lora_B at zero: make the adapter (and so its dropout) change the output
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.5)
    model.save_pretrained(target, safe_serialization=True)
    return target


def test_ppo_turns_dropout_off_so_the_first_minibatch_ratio_is_one(tmp_path, tiny_model_dir):
    """A hub adapter with lora_dropout 0.5: the policy in train mode (as PPO updates it) gives the same log-probs on
    two passes, so the first minibatch's ratio pi / pi_old is exactly 1; the same adapter loaded as PEFT loads it
    does not (the test can fail)."""
    from thai_grpo.methods.ppo import load_models, sequence_logprobs
    from thai_grpo.models.loading import load_policy

    adapter = adapter_with_dropout(tiny_model_dir, tmp_path / "adapter", 0.5)
    ids = torch.randint(3, 100, (4, 12))
    attention = torch.ones_like(ids)

    def ratio(policy):
        policy.train()
        with torch.no_grad():
            old = sequence_logprobs(policy, ids, attention, 6, 1.0)
            new = sequence_logprobs(policy, ids, attention, 6, 1.0)
        return torch.exp(new - old)

    models = load_models(tiny_model_dir, adapter, None, "verifier")
    assert torch.equal(ratio(models["policy"]), torch.ones(4, 6))
    assert all(module.p == 0 for model in models.values() for module in model.modules()
               if isinstance(module, torch.nn.Dropout))
    assert not torch.allclose(ratio(load_policy(tiny_model_dir, adapter, trainable=True)), torch.ones(4, 6))


def test_a_minibatch_split_into_chunks_makes_the_same_update(tmp_path, tiny_model_dir, tiny_adapter_dir):
    """_update with every minibatch in one chunk and with one row per chunk (gradients accumulated, each chunk's loss
    weighted by its share of real tokens): the same parameters after the step, the same statistics."""
    from thai_grpo.methods.ppo import _update, load_models

    start = []

    def run(per_chunk: int):
        torch.manual_seed(0)
        models = load_models(tiny_model_dir, tiny_adapter_dir, None, "verifier")
        settings = PPOSettings(score="verifier", batch_size=4, num_mini_batches=2, num_ppo_epochs=2,
                               learning_rate=1e-2)
        params = [p for m in (models["policy"], models["value"]) for p in m.parameters() if p.requires_grad]
        start[:] = [p.detach().clone() for p in params]
        optimizer = torch.optim.AdamW(params, lr=1e-2)
        generator = torch.Generator().manual_seed(1)
        lengths = torch.tensor([6, 3, 5, 1])
        mask = completion_mask(lengths, 6)
        rollout = {"ids": torch.randint(3, 100, (4, 10), generator=generator), "width": 4, "mask": mask,
                   "attention": torch.cat([torch.ones(4, 4, dtype=torch.long), mask.long()], 1),
                   "logprobs": -torch.rand(4, 6, generator=generator),
                   "rows": {"update": per_chunk, "checkpointing": False},
                   **{key: torch.randn(4, 6, generator=generator) * mask for key in ("advantages", "values",
                                                                                     "returns")}}
        stats, _ = _update(rollout, 1, settings, 42, models, optimizer, params)
        return stats, [p.detach().clone() for p in params]

    whole, whole_params = run(2)
    split, split_params = run(1)  # one row per chunk
    assert whole == pytest.approx(split, rel=1e-4, abs=1e-6)
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(whole_params, split_params))
    assert any(not torch.equal(a, b) for a, b in zip(whole_params, start))  # the step did move the parameters


def test_rollouts_are_the_same_whatever_the_chunk_size():
    """generate_by_chunks on the shipped tiny base + SFT adapter: one prompt per call, three, or all at once give the
    same rollouts token for token (each row samples from its own seed), so a card's chunk size changes no sample."""
    from pathlib import Path

    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.methods.ppo import generate_by_chunks
    from thai_grpo.models.loading import load_policy, load_tokenizer
    from thai_grpo.models.sampling import encode_prompts, generation_config, row_seeds, stop_token_ids

    shipped = Path(__file__).resolve().parents[1] / "assets" / "tiny-base"
    policy = load_policy(shipped / "base", shipped / "sft_adapter", merged=True).eval()
    tokenizer = load_tokenizer(shipped / "base")
    encoded = encode_prompts(tokenizer, ["2 บวก 3", "มีแอปเปิล 3 ผล ได้อีก 4 ผล มีกี่ผล", "10 ลบ 4", "5 คูณ 2"],
                             SYSTEM_PROMPT, {})
    config = generation_config(tokenizer, stop_token_ids(policy, tokenizer), 1, 8, 0.7)
    with torch.no_grad():
        outputs = [generate_by_chunks(policy, encoded, config, per_chunk, tokenizer.pad_token_id,
                                      row_seeds(seed, range(4), 1)) for per_chunk, seed in ((1, 5), (3, 5), (4, 5),
                                                                                            (4, 6))]
    assert torch.equal(outputs[0], outputs[1]) and torch.equal(outputs[0], outputs[2])
    assert not torch.equal(outputs[2], outputs[3])  # another seed, other rollouts


def test_each_ppo_pass_gets_its_own_rows_from_its_own_budget():
    """``ppo_pass_rows`` on Qwen3-0.6B: with a number, each pass within it by its own per-row floats; with auto on a
    T4, each pass the most rows whose own working set fits beside what PPO holds (one more would not), so the passes
    differ; on CUDA the update checkpoints its activations where that makes its chunks larger, and not on a card
    where a minibatch fits one chunk without it."""
    from test_memory_plan import QWEN3_0_6B

    from thai_grpo.jobs.memory_plan import GIB, Lora, logprob_pass_floats, rows_per_chunk
    from thai_grpo.jobs.memory_stages import (CARD_GIB, PROMPT_TOKENS, RESERVE_GIB, T4, ppo_held_bytes, ppo_pass_bytes,
                                              ppo_pass_rows)

    lora = Lora(r=16, target_modules=("q_proj", "v_proj"), lora_dropout=0.0)
    settings = {"batch_size": 64, "num_mini_batches": 8, "score": "verifier"}
    fixed = ppo_pass_rows(QWEN3_0_6B, lora, lora, {**settings, "chunk_floats": 2 ** 26}, 256)
    assert fixed["logprobs"] == rows_per_chunk(logprob_pass_floats(QWEN3_0_6B, PROMPT_TOKENS + 256), 64, 2 ** 26)
    assert not fixed["checkpointing"]
    auto = {**settings, "chunk_floats": "auto"}
    rows = ppo_pass_rows(QWEN3_0_6B, lora, lora, auto, 256, CARD_GIB)
    budget = (CARD_GIB - RESERVE_GIB) * GIB - sum(ppo_held_bytes(QWEN3_0_6B, lora, lora, "verifier", T4).values())
    prefixes = {"generate": "generation", "logprobs": "log-prob", "value": "value", "update": "update"}

    def peak(name: str, count: int, checkpointing: bool = False) -> int:
        phases = ppo_pass_bytes(QWEN3_0_6B, lora, lora, count, PROMPT_TOKENS, 256, 2, checkpointing)
        return max(sum(p.values()) for phase, p in phases.items() if phase.startswith(prefixes[name]))

    for name, limit in (("generate", 64), ("logprobs", 64), ("value", 64), ("update", 8)):
        assert peak(name, rows[name]) <= budget and (rows[name] == limit or peak(name, rows[name] + 1) > budget)
    assert rows["logprobs"] < rows["generate"] and rows["update"] < 8 and not rows["checkpointing"]
    on_cuda = ppo_pass_rows(QWEN3_0_6B, lora, lora, auto, 256, CARD_GIB, may_checkpoint=True)
    assert on_cuda["checkpointing"] and on_cuda["update"] > rows["update"]
    assert peak("update", on_cuda["update"], checkpointing=True) <= budget
    assert {k: v for k, v in on_cuda.items() if k != "update" and k != "checkpointing"} == \
        {k: v for k, v in rows.items() if k != "update" and k != "checkpointing"}
    assert not ppo_pass_rows(QWEN3_0_6B, lora, lora, auto, 256, 80.0, may_checkpoint=True)["checkpointing"]


def test_ppo_on_a_t4_sizes_from_the_memory_free_before_its_weights_load(monkeypatch):
    """On a (faked) 16 GB T4 the job notes the free memory at its start; PPO's four Qwen3-0.6B models then take ~4.5
    GiB of it, and ``auto`` still sizes every pass from what was free before them (the plan counts the weights itself);
    a reading after loading would count them twice and give fewer rows."""
    from types import SimpleNamespace

    import torch
    from test_memory_plan import QWEN3_0_6B

    import thai_grpo.jobs.memory_stages as memory_stages
    from thai_grpo.jobs.memory_plan import GIB, base_parameters
    from thai_grpo.methods.ppo import pass_rows

    config = {"vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
              "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "tie_word_embeddings": True}
    adapter = SimpleNamespace(r=16, target_modules={"q_proj", "k_proj", "v_proj", "o_proj"})
    models = {name: SimpleNamespace(config=config, peft_config={"default": adapter}) for name in ("policy", "value")}
    card, weights = 14.75 * GIB, 2 * 4 * base_parameters(QWEN3_0_6B)  # policy, reference, value, reward in float16
    loaded = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (card - weights * bool(loaded), card))
    monkeypatch.setattr("thai_grpo.jobs.devices.job_device", lambda: torch.device("cuda"))
    monkeypatch.setattr(memory_stages, "_FREE_AT_JOB_START", {})
    memory_stages.note_free_memory("cuda")  # model_job, before the script loads anything
    loaded.append(True)  # ... then the weights are on the card
    settings = PPOSettings(score="verifier", chunk_floats="auto", batch_size=64, num_mini_batches=8,
                           max_completion_length=256)
    before = pass_rows(models, settings, 256)
    monkeypatch.setattr(memory_stages, "_FREE_AT_JOB_START", {})  # read after loading: the weights counted twice
    after = pass_rows(models, settings, 256)
    assert before["logprobs"] > after["logprobs"] and before["update"] >= after["update"]


def test_a_checkpointed_update_gives_the_plain_updates_loss_and_gradients(tiny_model_dir, tiny_adapter_dir):
    """Activation checkpointing in PPO's update (``checkpoint_activations``) on the tiny model: the same losses and
    the same gradients of every trained parameter as the plain forward-backward, and it does recompute the layers."""
    from thai_grpo.methods.ppo import _chunk_losses, checkpoint_activations, load_models

    models = load_models(tiny_model_dir, tiny_adapter_dir, None, "verifier")
    settings = PPOSettings(score="verifier", batch_size=4)
    generator = torch.Generator().manual_seed(3)
    mask = completion_mask(torch.tensor([6, 3, 5, 1]), 6)
    rollout = {"ids": torch.randint(3, 100, (4, 10), generator=generator), "width": 4, "mask": mask,
               "attention": torch.cat([torch.ones(4, 4, dtype=torch.long), mask.long()], 1),
               "logprobs": -torch.rand(4, 6, generator=generator),
               **{key: torch.randn(4, 6, generator=generator) * mask for key in ("advantages", "values", "returns")}}
    params = [p for m in (models["policy"], models["value"]) for p in m.parameters() if p.requires_grad]

    first_mlp = next(m for n, m in models["policy"].named_modules() if n.endswith("layers.0.mlp"))
    calls = []
    first_mlp.register_forward_pre_hook(lambda *_: calls.append(1))

    def losses_and_gradients(checkpointing: bool):
        checkpoint_activations(models, checkpointing)
        calls.clear()
        for p in params:
            p.grad = None
        losses = _chunk_losses(rollout, torch.arange(4), settings, models)
        losses["loss"].backward()
        return {k: float(v.detach()) for k, v in losses.items()}, [p.grad.clone() for p in params], len(calls)

    plain, plain_grads, plain_calls = losses_and_gradients(False)
    checkpointed, checkpointed_grads, checkpointed_calls = losses_and_gradients(True)
    assert (plain_calls, checkpointed_calls) == (1, 2)  # the layer (its MLP) recomputed in the backward pass
    assert models["policy"].is_activation_checkpointing and models["value"].is_activation_checkpointing
    assert checkpointed == pytest.approx(plain, rel=1e-6, abs=1e-7)
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(plain_grads, checkpointed_grads))
    checkpoint_activations(models, False)
    assert not models["policy"].is_activation_checkpointing


def test_reward_base_takes_its_pad_id_from_the_tokenizer_when_config_json_has_none(tmp_path, tiny_model_dir):
    """Qwen3-0.6B's config.json has no pad_token_id; the reward model (and PPO's value models) read the tokenizer's,
    as TRL's RewardTrainer does, and pool at the last non-pad token."""
    import json
    import shutil

    from thai_grpo.methods.reward_model import load_reward_base
    from thai_grpo.models.loading import load_tokenizer

    base = tmp_path / "base"
    shutil.copytree(tiny_model_dir, base)
    config = json.loads((base / "config.json").read_text())
    config.pop("pad_token_id", None)
    (base / "config.json").write_text(json.dumps(config))
    assert load_reward_base(base).config.pad_token_id == load_tokenizer(base).pad_token_id is not None


def test_learning_rate_decays_as_transformers_linear_schedule():
    """PPO's learning rate per rollout batch follows transformers' linear schedule (TRL's PPOTrainer: no warmup,
    stepped once per batch), and the optimizer has TRL's weight decay 0, not torch's 0.01."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    from thai_grpo.methods.ppo import learning_rate_factor

    settings = PPOSettings(max_steps=5)
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=0, num_training_steps=5)
    for step in range(1, 6):
        assert learning_rate_factor(step, settings) == pytest.approx(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert learning_rate_factor(3, PPOSettings(max_steps=5, lr_scheduler_type="constant")) == 1.0
    assert PPOSettings().weight_decay == 0.0
