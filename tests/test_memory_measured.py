"""The memory plan is an upper bound, and a tight one: each GPU stage's real code run on this CPU in float32 on a
Qwen3-shaped stand-in, its peak of live tensor memory measured (tests/memory_peak.py: torch's profiler, the
allocator's own running total) and held against the plan computed at exactly those sizes with the CPU's precision:
``measured <= plan <= 1.25 x measured``.

The stand-in (``STANDIN``): Qwen3-0.6B's config with its full 151,936-token vocabulary and its ratios (head_dim = 2 x
hidden / heads, KV heads = heads / 2, intermediate = 3 x hidden), hidden 128 and 4 layers: the plan is per layer and
per hidden unit, and the vocabulary-wide tensors, the largest at these sizes, are full size."""

from __future__ import annotations

import pytest
import torch

from thai_grpo.jobs.memory_plan import Shape
from thai_grpo.jobs.memory_stages import FLOAT32_EVALUATION, sampling_stage
from memory_peak import measure_peak, storage_bytes

HIDDEN, LAYERS = 128, 4
BOUND = 1.25  # the plan may exceed the measured peak by at most this factor
MIB = 2 ** 20


def standin_config(**extra) -> dict:
    """Qwen3-0.6B's config.json at ``HIDDEN`` and ``LAYERS``, float32."""
    from thai_grpo_tools.rehearsal import QWEN3_0_6B_CONFIG

    return {**QWEN3_0_6B_CONFIG, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": HIDDEN // 2, "intermediate_size": 3 * HIDDEN,
            "torch_dtype": "float32", **extra}


@pytest.fixture(scope="module")
def standin():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    return Qwen3ForCausalLM(Qwen3Config(**standin_config())).eval()


def within_plan(measured: int, plan: dict) -> None:
    """``measured <= plan <= BOUND x measured``, with both in the message."""
    planned = plan["peak_bytes"]
    assert measured <= planned <= BOUND * measured, (
        f"{plan['stage']}: measured {measured / MIB:.1f} MiB, planned {planned / MIB:.1f} MiB "
        f"({planned / measured:.2f}x; pieces {plan['pieces_gib']})")
    print(f"{plan['stage']}: measured {measured / MIB:.1f} MiB, planned {planned / MIB:.1f} MiB, "
          f"{planned / measured:.3f}x")  # shown with pytest -s


def test_the_measurement_sees_a_known_allocation():
    """A call that allocates 4 MB, then 2 MB while the 4 MB are still held, frees both and returns 1 MB: it held 6 MB
    at most above what it found, and 1 MB at its end; a tensor it found is counted once, however many views of it."""
    found = torch.zeros(250_000)  # 1 MB

    def call():
        first = torch.ones(1_000_000)
        second = torch.ones(500_000)
        del first, second
        return torch.ones(250_000)

    peak = measure_peak(call, found, [found[:10], {"again": found.view(500, 500)}])
    assert (peak.found, peak.above, peak.end, peak.peak) == (1_000_000, 6_000_000, 1_000_000, 7_000_000)
    assert peak.result.shape == (250_000,) and storage_bytes(torch.nn.Linear(10, 3)) == (30 + 3) * 4


def cache_with_a_third_finished(layers: int = 6, prompts: int = 12, samples: int = 8, kv_heads: int = 2,
                                prompt: int = 32, budget: int = 48, head_dim: int = 64):
    """(a float32 ``SharedPromptCache`` of ``layers`` layers, ``prompts`` x ``samples`` rows, every buffer allocated;
    its bytes; the prompts to keep: two thirds of them)."""
    from thai_grpo.models.decoding import SharedPromptCache

    cache = SharedPromptCache.allocate([torch.randn(prompts, kv_heads, prompt, head_dim) for _ in range(layers)],
                                       [torch.randn(prompts, kv_heads, prompt, head_dim) for _ in range(layers)],
                                       torch.ones(prompts, prompt, dtype=torch.bool), samples, budget)
    for buffer in cache.keys + cache.values:
        buffer.normal_()
    size = storage_bytes(cache.prompt_keys, cache.prompt_values, cache.keys, cache.values)
    return cache, size, torch.tensor([index for index in range(prompts) if index % 3 != 0])


def test_compaction_holds_at_most_one_layers_kept_rows_beside_the_cache():
    """A 6-layer float32 cache of 12 prompts x 8 samples, a third of the prompts finished. The cache is built inside
    the measured call (the profiler sees the frees of what it saw allocated), so the peak above the cache's own bytes
    is what compacting it holds at once: at most a quarter of the cache (two thirds of the keys, were they all copied
    while the old list was held), and no more than the plan's compaction term."""
    from thai_grpo.jobs.memory_plan import sampling_kv_floats
    from thai_grpo.models.decoding import COMPACT_WHEN_DONE

    def build_and_compact():
        cache, size, kept = cache_with_a_third_finished()
        cache.compact(kept)
        return cache, size

    peak = measure_peak(build_and_compact)
    cache, size = peak.result
    extra = peak.above - size
    assert cache.prompts == 8 and len(cache.origin) == 64  # compacted: the finished prompts' rows are gone
    assert peak.end == storage_bytes(cache.prompt_keys, cache.prompt_values, cache.keys, cache.values) + \
        storage_bytes(cache.prompt_mask, cache.origin, cache.finished, cache.first_position, cache.column)
    one_layer = sampling_kv_floats(Shape(151936, 128, 384, 6, 4, 2, 64), 12, 8, 32, 48) // 12 * 4  # keys, bytes
    assert 0 < extra <= min(size / 4, one_layer * (1 - COMPACT_WHEN_DONE)), (extra / size, extra / one_layer)


def decoded(model, prompts: int, samples: int, prompt: int, budget: int, temperature, monkeypatch,
            seeds: list | None = None):
    """(``sample_continuations``' peak on ``prompts`` left-padded prompts of ``prompt`` tokens x ``samples``, up to
    ``budget`` new tokens; how many times the cache was compacted). A random model never writes its EOS: every 8th id
    stops a row here, so rows end early as a real model's do."""
    from thai_grpo.models import decoding
    from thai_grpo.models.sampling import generation_config, row_seeds, sample_continuations

    class Tokenizer:
        pad_token_id = 151643

    compactions = []
    compact = decoding.SharedPromptCache.compact
    monkeypatch.setattr(decoding.SharedPromptCache, "compact",
                        lambda cache, kept: (compactions.append(len(kept)), compact(cache, kept)))
    config = generation_config(Tokenizer, list(range(0, 151936, 8)), samples, budget, temperature)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 151643, (prompts, prompt), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, :prompt // 3] = 0  # left padding: the buffers are as wide as the widest prompt
    peak = measure_peak(lambda: sample_continuations(model, ids, mask, config,
                                                      seeds or row_seeds(0, range(prompts), samples)),
                        model)
    return peak, compactions


def test_a_held_out_sampling_call_with_a_compaction_is_within_its_plan(standin, monkeypatch):
    """Held-out sampling's (and the preference pairs', the same ``generate``) sampled call: 12 problems x 8 samples,
    prompts of 32 tokens, 48 new tokens at most; rows stop at different steps, the cache is compacted on the way."""
    peak, compactions = decoded(standin, 12, 8, 32, 48, 1.0, monkeypatch)
    assert compactions and min(compactions) < 12
    plan = sampling_stage("held-out sampling", Shape.from_config(standin.config), 12 * 8, 32 + 48, 32,
                          FLOAT32_EVALUATION, "", samples=8)
    within_plan(peak.peak, plan)


def test_a_held_out_call_with_its_greedy_rows_is_within_its_plan(standin, monkeypatch):
    """Held-out sampling as it runs: 6 problems x (8 samples and the greedy answer, one more row of each group)."""
    from thai_grpo.models import decoding
    from thai_grpo.models.sampling import row_seeds

    seeds = row_seeds(0, range(6), 8)
    with_greedy = [seed for start in range(0, 48, 8) for seed in (*seeds[start:start + 8], None)]
    peak, _ = decoded(standin, 6, 9, 32, 48, 1.0, monkeypatch, with_greedy)
    assert decoding.STOP_CHECK_EVERY < 48
    within_plan(peak.peak, sampling_stage("held-out sampling and greedy", Shape.from_config(standin.config), 6 * 9,
                                          32 + 48, 32, FLOAT32_EVALUATION, "", samples=9))


def standin_adapter(folder, seed: int, moved: bool):
    """A LoRA adapter of the rehearsal's shape (r 16 on the attention projections) saved for a fresh stand-in, its B
    random when ``moved`` (a policy that is not the base)."""
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from thai_grpo_tools.rehearsal import STANDIN_ADAPTER

    torch.manual_seed(seed)
    model = get_peft_model(Qwen3ForCausalLM(Qwen3Config(**standin_config())),
                           LoraConfig(task_type="CAUSAL_LM", **STANDIN_ADAPTER, init_lora_weights=not moved))
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def test_the_token_logprobs_stage_is_within_its_plan(tmp_path, tiny_model_dir, monkeypatch):
    """``policy_and_reference_logprobs`` on 4 completions of 24 sampled ids (2 problems x 2), the stand-in's weights in
    memory (``load_base_model`` hands them over; the tokenizer is the tiny base's), both adapters loaded by the call:
    within the plan of ``token_logprobs_stage`` at its rows, widest row and shortest prompt."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    import thai_grpo.models.loading as loading
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.evaluation.token_logprobs import policy_and_reference_logprobs, sampled_token_pairs
    from thai_grpo.jobs.memory_plan import Lora
    from thai_grpo_tools.rehearsal import STANDIN_ADAPTER
    from thai_grpo_tools.memory_plan import token_logprobs_stage

    torch.manual_seed(2)
    base = Qwen3ForCausalLM(Qwen3Config(**standin_config())).eval()
    monkeypatch.setattr(loading, "load_base_model", lambda path, dtype="float32", **kwargs: base)
    policy, reference = standin_adapter(tmp_path / "policy", 3, True), standin_adapter(tmp_path / "reference", 4, False)
    generator = torch.Generator().manual_seed(5)
    samples = [{"id": key, "question": question,
                "completions": [{"token_ids": torch.randint(0, 151936, (24,), generator=generator).tolist()}
                                for _ in range(2)]}
               for key, question in (("p1", "สมชายมีส้ม 3 ผล ได้อีก 4 ผล"), ("p2", "แม่ซื้อไข่ 12 ฟอง"))]
    peak = measure_peak(lambda: policy_and_reference_logprobs(tiny_model_dir, policy, reference, samples,
                                                              SYSTEM_PROMPT, 4), base)
    assert peak.result["num_completions"] == 4 and all(value >= -1e-9 for value in peak.result["kl_exact"])
    tokenizer = loading.load_tokenizer(tiny_model_dir)
    prompts = [len(prompt) for prompt, _ in sampled_token_pairs(tokenizer, samples, SYSTEM_PROMPT, 4)]
    plan = token_logprobs_stage(Shape.from_config(base.config), Lora.from_config(STANDIN_ADAPTER), 4,
                                max(prompts) + 24, 24, shortest_prompt=min(prompts))
    within_plan(peak.peak, plan)


@pytest.fixture(scope="module")
def standin_dirs(tmp_path_factory, tiny_tokenizer):
    """The stand-in saved as a base model folder (the tiny tokenizer beside it: its chat template; the model's ids go
    to 151,935) and an SFT adapter of the rehearsal's shape: (base folder, adapter folder)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    folder = tmp_path_factory.mktemp("standin")
    torch.manual_seed(0)
    Qwen3ForCausalLM(Qwen3Config(**standin_config())).save_pretrained(folder / "base", safe_serialization=True)
    tiny_tokenizer.save_pretrained(folder / "base")
    return folder / "base", standin_adapter(folder / "sft", 1, True)


@pytest.fixture(scope="module")
def ppo_models(standin_dirs):
    """PPO's models as ``ppo.load_models`` loads them for the verifier (policy, reference, fresh value model, dropout
    off); the tokenizer; the plan's LoRA shapes (the SFT adapter's, and the value model's as PPO builds it)."""
    from thai_grpo.jobs.memory_plan import Lora
    from thai_grpo.methods.ppo import load_models
    from thai_grpo.models.loading import load_tokenizer
    from thai_grpo_tools.rehearsal import STANDIN_ADAPTER

    models = load_models(*standin_dirs, None, "verifier")
    lora = Lora.from_config(STANDIN_ADAPTER)
    return models, load_tokenizer(standin_dirs[0]), lora, Lora(r=lora.r, target_modules=lora.target_modules)


def ppo_plan(models: dict, loras: tuple, settings, prompt: int) -> list[dict]:
    """``ppo_stages`` at ``settings``' sizes and ``prompt`` tokens of prompt, in the CPU's precision."""
    import dataclasses

    from thai_grpo.jobs.memory_stages import CPU, ppo_stages

    return ppo_stages("ppo", Shape.from_config(models["policy"].config), *loras, dataclasses.asdict(settings),
                      settings.max_completion_length, settings.chunk_floats, CPU, prompt)


def test_ppo_rollouts_are_within_their_plan(ppo_models):
    """``ppo._rollout`` for 4 prompts (the tiny tokenizer's chat template, ~94 tokens), up to 24 new tokens, every
    16th id a stop: generation through the decode loop, the policy's and reference's log-prob passes, the values."""
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.methods.ppo import _rollout
    from thai_grpo.methods.settings import PPOSettings

    models, tokenizer, *loras = ppo_models
    settings = PPOSettings(score="verifier", batch_size=4, num_mini_batches=1, max_completion_length=24,
                           chunk_floats=2 ** 28)
    rows = [{"id": i, "question": f"สมชายมีส้ม {i} ผล ได้อีก 4 ผล", "answer": i + 4} for i in range(4)]
    peak = measure_peak(lambda: _rollout(1, settings, 0, models, tokenizer, rows, SYSTEM_PROMPT, ["correct"],
                                         list(range(0, 151936, 16)), {}), models)
    within_plan(peak.peak, ppo_plan(models, loras, settings, peak.result["width"])[0])


@pytest.mark.parametrize("prompt, completion", [(32, 24), (16, 48)])
def test_a_ppo_update_is_within_its_plan(ppo_models, prompt, completion):
    """``ppo._update`` on a rollout of 4 rows in 2 minibatches (one optimizer step each, AdamW's states made by the
    first), completions longer and shorter than the prompt (the LM head runs on the completion's positions only), some
    padded."""
    from thai_grpo.methods.ppo import _update, completion_mask
    from thai_grpo.methods.settings import PPOSettings

    models, _, *loras = ppo_models
    settings = PPOSettings(score="verifier", batch_size=4, num_mini_batches=2, num_ppo_epochs=1,
                           max_completion_length=completion, chunk_floats=2 ** 28)
    params = [p for name in ("policy", "value") for p in models[name].parameters() if p.requires_grad]
    generator = torch.Generator().manual_seed(1)
    mask = completion_mask(torch.tensor([completion, completion // 2, 1, completion]), completion)
    attention = torch.cat([torch.ones(4, prompt, dtype=torch.long), mask.long()], 1)
    attention[1, :prompt // 2] = 0  # a left-padded prompt, completions that stopped early: sdpa gets a mask
    rollout = {"ids": torch.randint(0, 151936, (4, prompt + completion), generator=generator), "width": prompt,
               "mask": mask, "attention": attention,
               "logprobs": -torch.rand(4, completion, generator=generator),
               **{key: torch.randn(4, completion, generator=generator) for key in ("advantages", "values", "returns")}}
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    peak = measure_peak(lambda: _update(rollout, 1, settings, 42, models, optimizer, params), models, rollout)
    within_plan(peak.peak, ppo_plan(models, loras, settings, prompt)[1])


def grpo_step_peak(base_dir, adapter_dir, tmp_path) -> tuple[int, dict]:
    """(the measured peak of one GRPO step, the plan's largest GRPO stage at its sizes): the body of
    ``test_a_grpo_step_is_within_its_plan``, run in a fresh interpreter."""
    from trl import GRPOConfig, GRPOTrainer

    import thai_grpo.models.cpu as cpu
    from run_specs import run_spec
    from thai_grpo.data.problems import normalize_rows
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.data.synthetic import generate_problems
    from thai_grpo.jobs.memory_plan import Lora
    from thai_grpo.jobs.memory_stages import CPU
    from thai_grpo.methods.grpo import rollout_trainer
    from thai_grpo.models.sampling import encode_prompts
    from thai_grpo.workflow import load_config_files, variant_plan
    from thai_grpo_tools.memory_plan import grpo_stages
    from thai_grpo_tools.rehearsal import STANDIN_ADAPTER
    from workflow import REPO

    cpu.shares_prompts_on = lambda *args, **kwargs: False  # TRL's own passes, as on a GPU
    rows, _ = normalize_rows(generate_problems(2, seed=11, max_operand=8), "translated_question", "translated_answer")
    plan = variant_plan(load_config_files([str(REPO / "config/config.yaml")], str(REPO / "config/schema.yaml")), "grpo")
    args = {**plan["grpo_args"], "num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 8,
            "gradient_accumulation_steps": 1, "max_steps": 1, "save_steps": 100}
    spec = run_spec(tmp_path, "grpo", base_dir, adapter_dir, plan, rows, system_prompt=SYSTEM_PROMPT)
    trainer, *_ = rollout_trainer(GRPOTrainer, GRPOConfig, args, spec)
    peak = measure_peak(trainer.train, trainer.model)
    assert trainer.state.global_step == 1
    prompt = encode_prompts(trainer.processing_class, [row["question"] for row in rows], SYSTEM_PROMPT,
                            {})["input_ids"].shape[1]
    stages = grpo_stages("GRPO", args, Shape.from_config(trainer.model.config), Lora.from_config(STANDIN_ADAPTER),
                         CPU, prompt)
    return peak.peak, max(stages, key=lambda stage: stage["peak_bytes"])


def in_a_fresh_interpreter(function, *args):
    """``function(*args)`` in a fresh interpreter, as a job runs it: inside a test worker, a step's peak depends on
    which test files ran there before it (a GRPO step read 129 to 153 MiB, a reward-model step 101.4 to 102.1)."""
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def test_a_grpo_step_is_within_its_plan(standin_dirs, tmp_path):
    """One optimizer step of the pipeline's GRPO trainer (``grpo.rollout_trainer``, config/config.yaml's grpo variant)
    on 2 problems x 2 completions of up to 8 tokens, as a GPU runs it: TRL's own generate and log-prob passes (the
    CPU's shared-prompt speed-ups off), its fused log-prob head. Its peak, the train step's backward, within the
    larger of the plan's train step and rollouts (``grpo_stages``) at the prompt width the tokenizer gives."""
    within_plan(*in_a_fresh_interpreter(grpo_step_peak, *standin_dirs, tmp_path))


@pytest.fixture
def measured_train(monkeypatch):
    """A list that receives the ``Peak`` of the first ``transformers.Trainer.train`` call made while the fixture is in
    use, the trainer's model counted as found: a trainer built inside the code under test is measured from its
    train() on, its model's loading left out (as the plan leaves it out)."""
    import transformers

    peaks = []
    train = transformers.Trainer.train

    def measured(self, *args, **kwargs):
        if peaks:
            return train(self, *args, **kwargs)
        peak = measure_peak(lambda: train(self, *args, **kwargs), self.model)
        peaks.append(peak)
        return peak.result

    monkeypatch.setattr(transformers.Trainer, "train", measured)
    return peaks


def preference_pairs(base_dir, count: int, completion: int) -> tuple[list[dict], int]:
    """(``count`` pairs as the pipeline stores them, chosen right and rejected wrong, each completion ``completion``
    tokens of the tiny tokenizer; the longest prompt + completion in tokens)."""
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.data.problems import normalize_rows
    from thai_grpo.data.synthetic import generate_problems
    from thai_grpo.models.loading import load_tokenizer
    from thai_grpo_tools.rehearse_full import answer_pairs

    rows, _ = normalize_rows(generate_problems(count, seed=5, max_operand=8), "translated_question",
                             "translated_answer")
    pairs = answer_pairs(load_tokenizer(base_dir), rows, SYSTEM_PROMPT, completion)
    return pairs, max(len(pair["prompt_ids"]) + len(ids) for pair in pairs
                      for ids in (pair["chosen_ids"], pair["rejected_ids"]))


def test_a_dpo_step_is_within_its_plan(standin_dirs, tmp_path, measured_train):
    """One optimizer step of the pipeline's DPO (``dpo.train``, 2 pairs of 16-token completions: 4 rows), from its
    trainer's train() on: within the plan's DPO step at the batch's widest row."""
    from run_specs import GRPO, plan, run_spec
    import thai_grpo.methods.dpo as dpo
    from thai_grpo.jobs.memory_plan import Lora
    from thai_grpo.jobs.memory_stages import CPU
    from thai_grpo_tools.rehearsal import STANDIN_ADAPTER
    from thai_grpo_tools.memory_plan import trl_training_stage

    pairs, width = preference_pairs(standin_dirs[0], 2, 16)
    settings = {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 1, "max_steps": 1}
    result = dpo.train(run_spec(tmp_path, "dpo", *standin_dirs, plan("dpo", GRPO, dpo=settings), pairs=pairs))
    assert len(result["steps"]) == 1 and len(measured_train) == 1
    lora = Lora.from_config({**STANDIN_ADAPTER, "lora_dropout": 0.0})  # DPOConfig's default: dropout off
    within_plan(measured_train[0].peak, trl_training_stage("DPO", Shape.from_config(standin_config()), lora, 4, width,
                                                           width, "", CPU))


def reward_model_step_peak(base_dir, tmp_path, count: int) -> tuple[int, dict]:
    """(the measured peak of one reward-model step on ``count`` pairs from its trainer's train() on, the plan's
    reward-model step at the batch's widest row): the body of ``test_a_reward_model_step_is_within_its_plan``, run in
    a fresh interpreter."""
    from unittest import mock

    import transformers

    from run_specs import TRAINING
    from thai_grpo.jobs.memory_plan import Lora
    from thai_grpo.jobs.memory_stages import CPU
    from thai_grpo.methods.reward_model import pair_ids, reward_lora, train_reward_model
    from thai_grpo.models.loading import load_tokenizer
    from thai_grpo_tools.memory_plan import trl_training_stage

    pairs, _ = preference_pairs(base_dir, count, 16)
    tokenizer = load_tokenizer(base_dir)
    width = max(len(ids) for pair in pairs for ids in pair_ids(tokenizer, pair).values())
    args = {"per_device_train_batch_size": count, "gradient_accumulation_steps": 1, "max_steps": 1, "max_length": 1024}
    peaks, train = [], transformers.Trainer.train

    def measured(self, *args, **kwargs):
        peaks.append(measure_peak(lambda: train(self, *args, **kwargs), self.model))
        return peaks[-1].result

    with mock.patch.object(transformers.Trainer, "train", measured):
        result = train_reward_model(base_dir, pairs, args, None, tmp_path / "model", tmp_path / "checkpoints", 0, None,
                                    TRAINING, dtype="float32")
    assert len(result["steps"]) == 1 and len(peaks) == 1
    return peaks[0].peak, trl_training_stage("reward model", Shape.from_config(standin_config()),
                                             Lora.from_config(reward_lora()), 2 * count, width, 0, "", CPU,
                                             head="score")


@pytest.mark.parametrize("count", [2, 8])
def test_a_reward_model_step_is_within_its_plan(standin_dirs, tmp_path, count):
    """One optimizer step of the reward model (``train_reward_model``, ``count`` pairs: chosen and rejected rows,
    padded to the widest, so sdpa gets a mask and repeats the keys and values per query head), from its trainer's
    train() on: within the plan's reward-model step (score head) at the batch's widest row. Its peak is in the last
    layer's backward, every layer's activations held: 8 pairs pin the per-token terms."""
    within_plan(*in_a_fresh_interpreter(reward_model_step_peak, standin_dirs[0], tmp_path, count))
