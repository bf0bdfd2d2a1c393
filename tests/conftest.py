"""Shared fixtures: a tiny tokenizer and Qwen3 saved to disk, standing in for the hub's models offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# Two pytest workers share the machine's cores, and the workflow runs they start inherit this environment. OpenMP
# threads that wait for work sleep instead of spinning: set before torch loads its OpenMP runtime, which reads it once
# (a worker's torch spun a core away from the other worker's job). glibc keeps freed memory for reuse in the processes
# started from here instead of handing each large tensor back to the kernel (TRL's CPU log-prob tiles over the real
# config's 151,936-token vocabulary, ~150 MB each, were page-faulted in anew for every op). Neither changes a number.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("MALLOC_MMAP_MAX_", "0")
os.environ.setdefault("MALLOC_TRIM_THRESHOLD_", str(4 << 30))

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def synthetic_rows():
    from thai_grpo.data.synthetic import generate_problems

    return generate_problems(300, seed=7, max_operand=10)


@pytest.fixture(scope="session")
def tiny_tokenizer(synthetic_rows):
    from thai_grpo.data.problems import sft_target
    from thai_grpo.data.prompts import SYSTEM_PROMPT
    from thai_grpo.models.tiny_base import train_tokenizer

    texts = [f"{SYSTEM_PROMPT}\n{r['translated_question']}\n{sft_target(r['translated_answer'], r['answer'])}"
             for r in synthetic_rows]
    return train_tokenizer(texts, vocab_size=500)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer):
    """A 1-layer Qwen3 + tokenizer saved as a model folder, like a hub snapshot of the base."""
    from thai_grpo.models.tiny_base import build_tiny_qwen3

    model = build_tiny_qwen3(tiny_tokenizer, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                             intermediate_size=64, max_positions=512, seed=0)
    path = tmp_path_factory.mktemp("tiny-base")
    model.save_pretrained(path, safe_serialization=True)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_adapter_dir(tmp_path_factory, tiny_model_dir):
    """A freshly initialised LoRA adapter on the tiny base, saved like the hub's SFT adapter."""
    from peft import LoraConfig, get_peft_model

    from thai_grpo.models.loading import load_base_model

    model = get_peft_model(load_base_model(tiny_model_dir),
                           LoraConfig(task_type="CAUSAL_LM", r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
    path = tmp_path_factory.mktemp("tiny-adapter")
    model.save_pretrained(path, safe_serialization=True)
    return path


def pytest_collection_modifyitems(config, items):
    """Files with end-to-end runs (``slow``) first, the one with most such tests first, then every other file, largest
    first; a file's own order is kept (a stable sort of contiguous files). ``make test`` runs one file per worker at a
    time (``--dist loadfile``) in this order (``--no-loadscope-reorder``), so the long runs start at once and the
    short files fill in beside them."""
    from collections import Counter

    def file_of(item):
        return item.nodeid.split("::")[0]

    slow = Counter(file_of(item) for item in items if item.get_closest_marker("slow"))
    size = Counter(file_of(item) for item in items)
    items.sort(key=lambda item: (-slow[file_of(item)], -size[file_of(item)]))
