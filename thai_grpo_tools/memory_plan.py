"""`make memory-plan`: the real config's peak GPU memory per stage for Qwen3-0.6B on a 16 GB T4, computed, not
measured (results/memory_plan/plan.json and plan.md), from ``thai_grpo.jobs.memory_plan``'s pieces and
``thai_grpo.jobs.memory_stages``' stages; checked in tests/test_memory_measured.py and by `make rehearse-full`.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from thai_grpo.workflow import load_config_files, passk_settings
from thai_grpo.jobs.memory_plan import (ATTENTION_TARGETS, CHUNK_FLOATS, GIB, Lora, Shape, base_parameters,
                                        logprob_pass_floats, lora_parameters, rows_per_chunk, sampling_kv_floats)
from thai_grpo.jobs.memory_stages import (AUTO, CARD_GIB, FLOAT32_EVALUATION, PROMPT_TOKENS, RESERVE_GIB, T4, Precision,
                                          activation_bytes, attention_bias_bytes, backward_working_bytes,
                                          phased_stage, ppo_stages, prefill_layer_floats, sampling_batch_for_card,
                                          sampling_stage, stage, trained_bytes)
from thai_grpo_tools.rehearsal import QWEN3_0_6B_CONFIG

REPO = Path(__file__).resolve().parents[1]
QWEN3_0_6B = Shape.from_config(QWEN3_0_6B_CONFIG)
#: The cards the documents size for, by the total memory CUDA reports (GiB): a 16 GB T4 and an 80 GB A100 or H100.
CARDS_GIB = {"T4 16 GB": CARD_GIB, "80 GB (A100, H100)": 79.1}
# TRL's GRPO, RLOO and DPO trainers never build a batch's full logits: their fused LM head
# (trl.kernels.chunked_logprob) projects at most 4,096 tokens x 32,768 vocabulary entries at a time.
TRL_TILE_TOKENS, TRL_TILE_VOCAB = 4096, 32768
#: The real run's config files, in the order Snakemake merges them (`--configfile` on top of the default).
REAL_CONFIGS = ("config/config.yaml", "config/qwen3-0.6b.yaml")


def real_config(root, *extra) -> dict:
    """The real run's config as Snakemake builds it from the files under ``root``, ``extra`` files on top."""
    return load_config_files([Path(root) / path for path in REAL_CONFIGS] + list(extra))


def evaluation_precision(config: dict, training: Precision) -> Precision:
    """float32 where ``eval.dtype`` is float32 (the default), else the training stages' precision."""
    return FLOAT32_EVALUATION if config.get("eval", {}).get("dtype", "float32") == "float32" else training


def trl_training_stage(name: str, shape: Shape, lora: Lora, rows: int, width: int, logits_positions: int,
                       note: str, precision: Precision, head: str = "lm", checkpointing: bool = False) -> dict:
    """A TRL trainer's forward-backward on ``rows`` x ``width`` tokens (``lm`` head: one tile of its fused head)."""
    head_params = shape.hidden_size if head == "score" else 0
    pieces = {"weights": base_parameters(shape, head) * precision.frozen_bytes,
              **trained_bytes(shape, lora, precision, head_params),
              "activations": activation_bytes(shape, lora, rows * width, precision.compute_bytes, checkpointing),
              "attention_bias": attention_bias_bytes(shape, rows, width, precision.compute_bytes, checkpointing),
              "backward": backward_working_bytes(shape, rows * width, precision.compute_bytes)}
    if head == "lm":
        tile = min(rows * logits_positions, TRL_TILE_TOKENS) * min(shape.vocab_size, TRL_TILE_VOCAB)
        pieces["logits"] = int(tile * precision.head_tile_bytes)
    return stage(name, pieces, note)


def token_logprobs_stage(shape: Shape, lora: Lora, completions: int, width: int, completion: int,
                         chunk_floats: int = CHUNK_FLOATS, shortest_prompt: int = 1) -> dict:
    """The token log-probs stage in float32, per chunk the larger phase: three logits-sized tensors (a log-softmax, the
    policy's held while the reference's is made), or two and one completion's exact KL (nine float64 tensors)."""
    rows = rows_per_chunk(logprob_pass_floats(shape, width), completions, chunk_floats)
    batch = rows * (width - shortest_prompt + 1) * shape.vocab_size * 4  # one chunk's logits, float32
    weights = {"weights": (base_parameters(shape) + 2 * lora_parameters(shape, lora)) * 4}
    return phased_stage("token log-probs (k1 vs k3)", {
        "log-softmax": {**weights, "logits": 3 * batch},
        "exact KL": {**weights, "logits": 2 * batch, "exact_kl": completion * shape.vocab_size * (9 * 8 + 1)}},
        f"float32 weights on every device; {rows} rows per chunk of {width} tokens (two log-softmax batches held), "
        "float64 exact KL of one completion at a time")


def sft_shape(config: dict, sft_lora: Lora | None) -> tuple[Lora, Lora]:
    """(the SFT adapter's LoRA: ``sft_lora``, else the reward model's shape with dropout 0.05; the reward model's)."""
    reward_lora = config.get("reward_model", {}).get("lora") or {}
    reward = Lora(r=int(reward_lora.get("r", 16)), target_modules=tuple(sorted(reward_lora.get(
        "target_modules", ATTENTION_TARGETS))), lora_dropout=float(reward_lora.get("lora_dropout", 0.0)))
    return sft_lora or Lora(r=reward.r, target_modules=reward.target_modules, lora_dropout=0.05), reward


def generate_stage(name: str, shape: Shape, sequences: int, width: int, prompt: int, precision: Precision,
                   note: str, trained: dict | None = None) -> dict:
    """One TRL rollout ``generate`` call beside ``trained``: weights, KV cache, one layer's prefill and the last
    position's float32 logits (x 3: scores, processed scores, probabilities)."""
    kv = sampling_kv_floats(shape, sequences, 1, prompt, width - prompt)
    return stage(name, {"weights": base_parameters(shape) * precision.frozen_bytes, **(trained or {}),
                        "kv_cache": kv * precision.compute_bytes,
                        "prefill_layer": prefill_layer_floats(shape, sequences, prompt) * precision.compute_bytes,
                        "logits": 3 * sequences * shape.vocab_size * 4}, note)


def ppo_chunk_floats_for_card(shape: Shape, sft: Lora, value: Lora, settings: dict, completion: int, card_gib: float,
                              precision: Precision = T4, prompt: int = PROMPT_TOKENS) -> int:
    """``ppo.chunk_floats`` for a card: the largest power of two whose PPO stages fit, then the smallest alike."""
    def peaks(power: int) -> tuple:
        plans = ppo_stages("", shape, sft, value, {**settings, "chunk_floats": 2 ** power}, completion, 2 ** power,
                           precision, prompt)
        return tuple(plan["peak_bytes"] for plan in plans)

    power = next((power for power in range(40, 23, -1) if max(peaks(power)) <= (card_gib - RESERVE_GIB) * GIB), None)
    if power is None:
        raise ValueError(f"PPO does not fit a {card_gib:.1f} GiB card even in chunks of 2^24 floats: lower "
                         "ppo.batch_size or the completion length")
    while power > 24 and peaks(power - 1) == peaks(power):
        power -= 1
    return 2 ** power


def grpo_stages(label: str, args: dict, shape: Shape, sft: Lora, precision: Precision, prompt: int) -> list[dict]:
    """A GRPO/RLOO run: its forward-backward and its rollouts (batch x accumulation completions at once)."""
    rows, length = int(args["per_device_train_batch_size"]), int(args["max_completion_length"])
    generation = rows * int(args.get("gradient_accumulation_steps", 1))
    checkpointing = bool(args.get("activation_checkpointing", False))
    lora = dataclasses.replace(sft, lora_dropout=0.0) if args.get("disable_dropout") else sft
    train = trl_training_stage(  # TRL's fused head projects the completion positions only (a CPU too: shared_prefix)
        f"{label}: train step", shape, lora, rows, prompt + length, length,
        f"{rows} completions of {length} tokens per forward-backward; activation checkpointing "
        f"{'on' if checkpointing else 'off'}; lora_dropout {lora.lora_dropout}", precision, checkpointing=checkpointing)
    rollouts = generate_stage(
        f"{label}: rollouts", shape, generation, prompt + length, prompt, precision,
        f"{generation} completions per generation batch (TRL: batch x gradient_accumulation_steps), sampled through "
        "the policy's weights", trained_bytes(shape, lora, precision))
    return [train, rollouts]


def sizes_for_card(config: dict, card_gib: float, shape: Shape = QWEN3_0_6B, sft_lora: Lora | None = None,
                   precision: Precision = T4, prompt: int = PROMPT_TOKENS) -> dict:
    """``eval.batch_size``, ``passk.batch_size`` and ``ppo.chunk_floats`` as the jobs size ``auto`` on ``card_gib``."""
    grpo, ev = config["grpo"], config["eval"]
    completion = int(ev.get("max_new_tokens") or grpo.get("max_completion_length", 256))
    passk = passk_settings(config)

    def batch(requested, num_samples: int, problems: int) -> int:
        if requested != AUTO:
            return int(requested)
        return sampling_batch_for_card(shape, num_samples, completion, problems, card_gib,
                                       evaluation_precision(config, precision), prompt)

    sft, reward = sft_shape(config, sft_lora)
    chunk_floats = {}
    for name, overrides in config.get("variants", {}).items():
        if overrides.get("method") == "ppo":
            settings = overrides.get("ppo", {})
            requested = settings.get("chunk_floats", CHUNK_FLOATS)
            length = int(settings.get("max_completion_length", grpo.get("max_completion_length", 256)))
            chunk_floats[name] = int(requested) if requested != AUTO else ppo_chunk_floats_for_card(
                shape, sft, reward, settings, length, card_gib, precision, prompt)
    return {"eval.batch_size": batch(ev.get("batch_size", 32), int(ev.get("num_samples", 8)),
                                     int(config.get("data", {}).get("heldout_size", 256))),
            "passk.batch_size": batch(passk["batch_size"], int(passk["num_samples"]), int(passk["problems"])),
            "ppo.chunk_floats": chunk_floats}


def sized_config(config: dict, sizes: dict) -> dict:
    """``config`` with ``sizes_for_card``'s sizes in place of ``auto`` (and of the numbers, which they keep)."""
    chunk_floats = sizes["ppo.chunk_floats"]
    variants = {name: {**overrides, "ppo": {**overrides.get("ppo", {}), "chunk_floats": chunk_floats[name]}}
                if name in chunk_floats else overrides for name, overrides in config.get("variants", {}).items()}
    return {**config, "eval": {**config["eval"], "batch_size": sizes["eval.batch_size"]},
            "passk": {**(config.get("passk") or {}), "batch_size": sizes["passk.batch_size"]}, "variants": variants}


def stage_plans(config: dict, shape: Shape = QWEN3_0_6B, sft_lora: Lora | None = None,
                chunk_floats: int = CHUNK_FLOATS, precision: Precision = T4, prompt: int = PROMPT_TOKENS,
                logprob_rows: int = 32, card_gib: float = CARD_GIB) -> list[dict]:
    """Every stage of a real-config run for ``shape`` in ``precision``, ``auto`` sized for ``card_gib``;
    ``logprob_rows``: the completions the token log-probs stage scores at once."""
    config = sized_config(config, sizes_for_card(config, card_gib, shape, sft_lora, precision, prompt))
    grpo, ev, variants = config["grpo"], config["eval"], config.get("variants", {})
    sft, reward = sft_shape(config, sft_lora)
    completion = int(ev.get("max_new_tokens") or grpo.get("max_completion_length", 256))
    plans = []
    for variant, label in (("grpo", "GRPO full"), ("grpo_fast", "GRPO fast")):
        if variant in variants:
            plans += grpo_stages(label, {**grpo, **variants[variant].get("grpo", {})}, shape, sft, precision, prompt)
    width = prompt + completion
    evaluation = evaluation_precision(config, precision)
    plans.append(sampling_stage(
        "held-out sampling", shape, int(ev["batch_size"]) * int(ev["num_samples"]), width, prompt, evaluation,
        f"{ev['batch_size']} problems x {ev['num_samples']} samples per generate call, each prompt held once, in "
        f"{evaluation.device}", samples=int(ev["num_samples"])))
    passk = passk_settings(config)
    plans.append(sampling_stage(
        "pass@k sampling", shape, int(passk["batch_size"]) * int(passk["num_samples"]), width, prompt, evaluation,
        f"{passk['batch_size']} problems x {passk['num_samples']} samples per generate call (passk.batch_size), "
        "each prompt held once", samples=int(passk["num_samples"])))
    plans.append(token_logprobs_stage(shape, sft, logprob_rows, width, completion, chunk_floats))
    if any(v.get("method") in ("ppo", "dpo") for v in variants.values()):
        rm = config.get("reward_model", {}).get("args", {})
        rm_rows, checkpointing = 2 * int(rm.get("per_device_train_batch_size", 8)), bool(
            rm.get("activation_checkpointing", False))
        plans.append(trl_training_stage(
            "reward model: train step", shape, reward, rm_rows, prompt + completion + 1, 0,
            f"{rm_rows // 2} pairs (chosen and rejected) of up to {prompt + completion + 1} tokens, sequence-"
            f"classification head in float32; activation checkpointing {'on' if checkpointing else 'off'}",
            precision, head="score", checkpointing=checkpointing))
    for name, overrides in variants.items():
        if name not in ev.get("models", []):
            continue
        if overrides.get("method") == "dpo":
            dpo = {**grpo, **overrides.get("grpo", {}), **overrides.get("dpo", {})}  # DPO inherits grpo's loop fields
            pairs, length = int(dpo.get("per_device_train_batch_size", 8)), int(dpo.get("max_length", 1024))
            checkpointing = bool(dpo.get("activation_checkpointing", False))
            plans.append(trl_training_stage(
                f"DPO ({name}): train step", shape, dataclasses.replace(sft, lora_dropout=0.0), 2 * pairs, length,
                length, f"{pairs} pairs, chosen and rejected concatenated: {2 * pairs} rows of up to {length} tokens; "
                f"activation checkpointing {'on' if checkpointing else 'off'}; dropout off (DPOConfig's default)",
                precision, checkpointing=checkpointing))
        if overrides.get("method") == "ppo":
            plans += ppo_stages(name, shape, sft, reward, {**overrides.get("ppo", {})}, completion, chunk_floats,
                                precision, prompt)
    return plans


def grid(head: list[str], rows: list[list[str]]) -> str:
    """A markdown table."""
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                      *("| " + " | ".join(row) + " |" for row in rows)])


def markdown_table(plans: list[dict]) -> str:
    """The plan as a markdown table: stage, its pieces in GiB, the peak and the verdict."""
    return grid(["stage", "pieces (GiB)", "peak (GiB)", "verdict"],
                [[plan["stage"], ", ".join(f"{key} {value}" for key, value in plan["pieces_gib"].items()),
                  str(plan["peak_gib"]), plan["verdict"]] for plan in plans])


def main() -> int:
    """The real config's plan and its sizes per card into OUT_DIR (plan.json, plan.md), printed."""
    from thai_grpo.core.io import write_json

    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "results" / "memory_plan"
    config = real_config(REPO)
    plans = stage_plans(config)
    sizes = {card: sizes_for_card(config, gib) for card, gib in CARDS_GIB.items()}
    write_json(out_dir / "plan.json", {"model": "Qwen/Qwen3-0.6B", "card": "16 GB T4", "card_gib": CARD_GIB,
                                       "reserve_gib": RESERVE_GIB, "measured": False, "stages": plans,
                                       "sizes_per_card": sizes})
    (out_dir / "plan.md").write_text(markdown_table(plans) + "\n", encoding="utf-8")
    print(markdown_table(plans))
    for card, chosen in sizes.items():
        print(f"{card}: {chosen}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
