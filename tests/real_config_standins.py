"""The real config's downloads stood in for offline (tests/test_real_config_rehearsal.py): a Hugging Face cache
holding the taught Qwen3-shaped base and SFT adapter (thai_grpo_tools.rehearsal) at the config's revisions and the
dataset as ``datasets`` caches a downloaded parquet, and a config of tiny sizes to merge on top."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from workflow import REPO

from thai_grpo.data.problems import read_question_answer_tsv
from thai_grpo_tools.rehearsal import build_standin_adapter, build_standin_base, standin_problems

REAL_CONFIG = REPO / "config" / "qwen3-0.6b.yaml"
FAKE_COMMIT = "0" * 39 + "1"  # what refs/<branch> points at for a revision that is not a commit hash
# Tiny sizes on top of the real config: every stage of the chapter's comparison runs. PPO's chunk budget is cut so
# that its passes over the 151,936-wide logits are split into chunks, as Qwen3-0.6B's are on a T4.
PPO_TINY = {"batch_size": 4, "max_steps": 2, "num_ppo_epochs": 1, "num_mini_batches": 2, "save_steps": 1,
            "chunk_floats": 40_000_000}
TINY_CONFIG = {
    "device": "cpu",  # the real config stops without a CUDA GPU; the stand-ins run on the CPU
    "data": {"train_size": 4, "heldout_size": 4},
    "grpo": {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "max_completion_length": 24,
             "max_steps": 2, "save_steps": 1},
    "reward_model": {"args": {"per_device_train_batch_size": 4, "max_length": 256}},
    "variants": {"dr_grpo": {"grpo": {"max_steps": 1}}, "rloo": {"grpo": {"max_steps": 1}},
                 "dpo": {"dpo": {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 1,
                                 "max_length": 256}},
                 "ppo": {"ppo": PPO_TINY}, "ppo_verifier": {"ppo": PPO_TINY}},
    "eval": {"num_samples": 2, "ks": [1, 2], "max_new_tokens": 24, "batch_size": 8, "bootstrap_samples": 100},
}
MGSM_PROBLEMS = 8


def hub_snapshot(hub_cache: Path, repo_id: str, revision: str, repo_type: str = "model") -> Path:
    """The snapshot folder huggingface_hub reads offline for ``repo_id`` at ``revision`` (created, with a ref from the
    branch name to a commit when ``revision`` is not a commit hash)."""
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
    finds it offline (``<namespace>___<name>/<config>/<version>/<commit>/`` in the cache)."""
    import datasets
    from datasets.packaged_modules.parquet.parquet import Parquet

    name = repo_id.split("/")[-1]
    parquet = scratch / f"{name}-train.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(parquet))
    builder = Parquet(cache_dir=str(scratch / "prepare"), dataset_name=name, data_files={"train": str(parquet)},
                      hash=FAKE_COMMIT)
    builder.download_and_prepare()
    shutil.copytree(builder.cache_dir, datasets_cache / repo_id.replace("/", "___") / "default" / "0.0.0" / FAKE_COMMIT)


def fill_hub_cache(hf_home: str | Path, config_out: str | Path, real_config: str | Path = REAL_CONFIG,
                   num_problems: int = 24) -> dict:
    """Fill ``hf_home`` with stand-ins for everything ``real_config`` downloads and write the tiny config to merge on
    top of it (``config_out``; the head of the MGSM file beside it). Returns the tiny config."""
    real = yaml.safe_load(Path(real_config).read_text(encoding="utf-8"))
    hf_home, config_out = Path(hf_home), Path(config_out)
    scratch = hf_home / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    extra_name, extra_spec = next(iter(real["eval"]["extra_sets"].items()))
    mgsm = config_out.with_name(f"{extra_name}_head.tsv")
    lines = (REPO / extra_spec["path"]).read_text(encoding="utf-8").splitlines(keepends=True)[:MGSM_PROBLEMS]
    mgsm.write_text("".join(lines), encoding="utf-8")
    problems = standin_problems(num_problems)
    base = hub_snapshot(hf_home / "hub", real["base"]["name_or_path"], real["base"]["revision"])
    loss = build_standin_base(base, problems, read_question_answer_tsv(mgsm)["question"],
                              real["data"]["system_prompt"])
    print(f"stand-in base: {base} (teaching loss {loss:.3f})")
    build_standin_adapter(base, hub_snapshot(hf_home / "hub", real["sft"]["name_or_path"], real["sft"]["revision"]))
    cache_hub_dataset(hf_home / "datasets", real["data"]["hub"]["path"], problems, scratch)
    shutil.rmtree(scratch)
    tiny = {**TINY_CONFIG, "eval": {**TINY_CONFIG["eval"], "extra_sets": {extra_name: {"path": str(mgsm)}}}}
    config_out.write_text(yaml.safe_dump(tiny, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return tiny


def precision_overrides(dtype: str) -> dict:
    """The config a 16-bit rehearsal adds on top of the tiny one: the training stages' frozen weights in ``dtype``
    (``base.dtype``, honoured on a CPU too), evaluation in float32."""
    return {"base": {"dtype": dtype}, "eval": {"dtype": "float32"}}
