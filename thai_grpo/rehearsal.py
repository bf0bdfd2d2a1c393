"""The real run, rehearsed offline: a Hugging Face cache filled with Qwen3-shaped stand-ins for what
``config/qwen3-0.6b.yaml`` downloads, and a config of tiny sizes to merge on top of it.

What the real config names, and what stands in for it here (same repo ids, same revisions, same file layout):
- the base model (``Qwen/Qwen3-0.6B`` at its pinned commit): a tiny Qwen3 whose tokenizer has Qwen3's own chat
  template (TRL ships it, ``trl/chat_templates/qwen3.jinja``: ``enable_thinking`` and all) and TRL's Qwen3
  response template, so GRPOTrainer decodes completions with ``parse_response`` as it would for a hub tokenizer
  that ships one. The model is taught, in a few seconds, to open its answer with a think block when the prompt
  leaves thinking on and to answer bare when ``enable_thinking: false`` closed the block in the prompt: what it
  writes shows which prompt it saw;
- the SFT adapter (``kobkrit/qwen3-0.6b-th-sft-lora``): a LoRA adapter on that model;
- the dataset (``VISAI-AI/gsm8k-thai``): synthetic problems in its columns, cached as ``datasets`` caches a
  downloaded parquet;
- MGSM Thai (``eval.extra_sets.mgsm_th``, the original TSV in data/mgsm/): its first problems, same format.

``python -m thai_grpo.rehearsal HF_HOME CONFIG_OUT [REAL_CONFIG]`` fills HF_HOME and writes the tiny config;
tests/test_real_config_rehearsal.py and scripts/gpu_check.sh both use it.
"""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

import yaml

from thai_grpo.data import build_prompt, read_question_answer_tsv

REPO = Path(__file__).resolve().parents[1]
REAL_CONFIG = REPO / "config" / "qwen3-0.6b.yaml"
FAKE_COMMIT = "0" * 39 + "1"  # what refs/<branch> points at for a revision that is not a commit hash
# What the stand-in writes before its number: with thinking on, a think block with more Thai letters than the
# ten Latin ones of its tags (so the Thai-script reward can pay); with thinking off, nothing.
THINKING_ON, THINKING_OFF = "<think>\nคิดทีละขั้นตอนแล้วตอบเป็นตัวเลข\n</think>\n\n", ""
STANDIN_SIZES = {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2, "intermediate_size": 128,
                 "max_positions": 4096}
# Tiny sizes merged on top of the real config: every stage runs (measured on 2 CPU cores: ~2 min of Snakemake
# alone, 3.5 min for the whole test while another job held one core).
TINY_CONFIG = {
    "data": {"train_size": 4, "heldout_size": 4},
    "grpo": {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "max_completion_length": 24,
             "max_steps": 2, "save_steps": 1},
    "eval": {"num_samples": 2, "ks": [1, 2], "max_new_tokens": 24, "batch_size": 8, "bootstrap_samples": 100},
}
MGSM_PROBLEMS = 8  # the first problems of the real MGSM Thai file, as the second held-out set


def qwen3_chat_template() -> str:
    """Qwen3's own chat template, as TRL ships it."""
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text(encoding="utf-8")


def standin_tokenizer(texts: list[str], vocab_size: int = 1000):
    """A byte-level BPE tokenizer with Qwen3's special and think tokens, chat template and response template."""
    from trl.chat_template_utils import add_response_schema

    from thai_grpo.models import train_tokenizer

    tokenizer = train_tokenizer(texts, vocab_size)
    tokenizer.chat_template = qwen3_chat_template()
    return add_response_schema(tokenizer)


def standin_problems(count: int, seed: int = 3) -> list[dict]:
    """Thai problems in VISAI-AI/gsm8k-thai's columns (``translated_question``, ``translated_answer``)."""
    from thai_grpo.synthetic import generate_problems

    return [{"translated_question": row["translated_question"], "translated_answer": row["translated_answer"]}
            for row in generate_problems(count, seed=seed, max_operand=9)]


def teaching_examples(tokenizer, questions: list[str], system_prompt: str) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, completion ids) pairs: each question with thinking on (a think block, then a number) and off
    (the number alone), rendered by the tokenizer's chat template as the pipeline renders them."""
    examples = []
    for index, question in enumerate(questions):
        for thinking, opening in ((True, THINKING_ON), (False, THINKING_OFF)):
            prompt = tokenizer.apply_chat_template(build_prompt(question, system_prompt), tokenize=False,
                                                   add_generation_prompt=True, enable_thinking=thinking)
            completion = f"{opening}{index % 10}{tokenizer.eos_token}"
            examples.append((tokenizer(prompt, add_special_tokens=False)["input_ids"],
                             tokenizer(completion, add_special_tokens=False)["input_ids"]))
    return examples


def teach(model, examples: list[tuple[list[int], list[int]]], steps: int = 120, batch_size: int = 8,
          learning_rate: float = 3e-3, seed: int = 0) -> float:
    """A few AdamW steps of next-token loss on the completions only; returns the last batch's loss."""
    import torch

    generator = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    model.train()
    loss = torch.tensor(0.0)
    for _ in range(steps):
        batch = [examples[generator.randrange(len(examples))] for _ in range(batch_size)]
        width = max(len(p) + len(c) for p, c in batch)
        ids = torch.full((batch_size, width), model.config.pad_token_id)
        mask = torch.zeros((batch_size, width), dtype=torch.long)
        labels = torch.full((batch_size, width), -100)
        for row, (prompt, completion) in enumerate(batch):
            ids[row, :len(prompt) + len(completion)] = torch.tensor(prompt + completion)
            mask[row, :len(prompt) + len(completion)] = 1
            labels[row, len(prompt):len(prompt) + len(completion)] = torch.tensor(completion)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    return loss.item()


def build_standin_base(target: Path, problems: list[dict], mgsm_questions: list[str], system_prompt: str,
                       seed: int = 0) -> float:
    """The base model folder: stand-in tokenizer and tiny Qwen3, taught the think-block habit; returns its loss."""
    from thai_grpo.models import build_tiny_qwen3

    questions = [p["translated_question"] for p in problems]
    texts = [system_prompt] + questions + mgsm_questions + [p["translated_answer"] for p in problems] + [THINKING_ON] * 20
    tokenizer = standin_tokenizer(texts)
    model = build_tiny_qwen3(tokenizer, **STANDIN_SIZES, seed=seed)
    # Taught on the short synthetic prompts only (seconds); the habit carries over to MGSM's longer ones.
    loss = teach(model, teaching_examples(tokenizer, questions, system_prompt), seed=seed)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    return loss


def build_standin_adapter(base_dir: Path, target: Path) -> None:
    """A LoRA adapter on the stand-in base, saved as PEFT saves the hub's SFT adapter."""
    from peft import LoraConfig, get_peft_model

    from thai_grpo.models import load_base_model

    config = LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    get_peft_model(load_base_model(base_dir), config).save_pretrained(target, safe_serialization=True)


def hub_snapshot(hub_cache: Path, repo_id: str, revision: str, repo_type: str = "model") -> Path:
    """The snapshot folder huggingface_hub reads offline for ``repo_id`` at ``revision`` (created, with a ref
    from the branch name to a commit when ``revision`` is not a commit hash)."""
    folder = hub_cache / f"{repo_type}s--{repo_id.replace('/', '--')}"
    commit = revision if len(revision) == 40 and all(c in "0123456789abcdef" for c in revision) else FAKE_COMMIT
    if commit != revision:
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs" / revision).write_text(commit)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    return snapshot


def cache_hub_dataset(datasets_cache: Path, repo_id: str, rows: list[dict], scratch: Path) -> None:
    """``rows`` as ``datasets`` caches a hub dataset's parquet after a download, so that ``load_dataset(repo_id)``
    finds it offline (its fallback reads ``<namespace>___<name>/<config>/<version>/<commit>/`` in the cache)."""
    import datasets
    from datasets.packaged_modules.parquet.parquet import Parquet

    name = repo_id.split("/")[-1]
    parquet = scratch / f"{name}-train.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(parquet))
    builder = Parquet(cache_dir=str(scratch / "prepare"), dataset_name=name, data_files={"train": str(parquet)},
                      hash=FAKE_COMMIT)
    builder.download_and_prepare()
    target = datasets_cache / repo_id.replace("/", "___") / "default" / "0.0.0" / FAKE_COMMIT
    shutil.copytree(builder.cache_dir, target)


def write_mgsm_head(source: Path, target: Path, count: int = MGSM_PROBLEMS) -> list[str]:
    """The first ``count`` lines of the MGSM Thai TSV, in its own format; returns their questions."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)[:count]
    target.write_text("".join(lines), encoding="utf-8")
    return read_question_answer_tsv(target)["question"]


def fill_hub_cache(hf_home: str | Path, config_out: str | Path, real_config: str | Path = REAL_CONFIG,
                   num_problems: int = 24) -> dict:
    """Fill ``hf_home`` with stand-ins for everything ``real_config`` downloads and write the tiny config merged
    on top of it (``config_out``; its MGSM file beside it). Returns the tiny config."""
    real = yaml.safe_load(Path(real_config).read_text(encoding="utf-8"))
    hf_home, config_out = Path(hf_home), Path(config_out)
    scratch = hf_home / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    extra_name, extra_spec = next(iter(real["eval"]["extra_sets"].items()))
    mgsm = config_out.with_name(f"{extra_name}_head.tsv")
    mgsm_questions = write_mgsm_head(REPO / extra_spec["path"], mgsm)
    problems = standin_problems(num_problems)
    base = hub_snapshot(hf_home / "hub", real["base"]["name_or_path"], real["base"]["revision"])
    loss = build_standin_base(base, problems, mgsm_questions, real["data"]["system_prompt"])
    print(f"stand-in base: {base} (teaching loss {loss:.3f})")
    build_standin_adapter(base, hub_snapshot(hf_home / "hub", real["sft"]["name_or_path"], real["sft"]["revision"]))
    cache_hub_dataset(hf_home / "datasets", real["data"]["hub"]["path"], problems, scratch)
    shutil.rmtree(scratch)
    tiny = {**TINY_CONFIG, "eval": {**TINY_CONFIG["eval"], "extra_sets": {extra_name: {"path": str(mgsm)}}}}
    config_out.write_text(yaml.safe_dump(tiny, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return tiny


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: python -m thai_grpo.rehearsal HF_HOME CONFIG_OUT [REAL_CONFIG]")
    fill_hub_cache(*sys.argv[1:])
