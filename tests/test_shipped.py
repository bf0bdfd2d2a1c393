"""The shipped base and SFT adapter (thai_grpo.core.shipped): what built_by.json records, the checks that refuse a
shipped folder the config or data would not rebuild, and the folder loading like a hub snapshot."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from thai_grpo.core import shipped
from thai_grpo_tools.ship_base import ship
from thai_grpo.core.config import ConfigError
from thai_grpo.workflow import checked_config, load_config_files, recipe
from thai_grpo.core.hub import fetch_model

REPO = Path(__file__).resolve().parents[1]
CONFIG = {"seed": 42, "base": {"source": "scratch", "dtype": "float32", "pretrain": {"max_steps": 4}},
          "corpus": {"seed": 0, "sft_slip_rate": 0.35}, "sft": {"source": "train", "lora": {"r": 4}}}
PRETRAIN = [{"question": "q1", "answer": 3}, {"question": "q2", "answer": 5}]
SFT = [{"question": "q3", "answer": 7}]


@pytest.fixture
def shipped_dir(tmp_path, tiny_model_dir, tiny_adapter_dir):
    (tiny_model_dir / "training_args.bin").write_bytes(b"pickle")  # what a Trainer leaves: never shipped
    ship(tiny_model_dir, tiny_adapter_dir, tmp_path / "tiny-base", CONFIG, "system", PRETRAIN, SFT, "abc1234")
    return tmp_path / "tiny-base"


def test_recipe_ignores_where_the_model_comes_from():
    shipped_config = copy.deepcopy(CONFIG)
    shipped_config["base"].update(source="shipped", name_or_path="assets/tiny-base")
    shipped_config["sft"]["source"] = "shipped"
    assert recipe(shipped_config, "system") == recipe(CONFIG, "system")
    assert recipe(CONFIG, "system")["base"] == {"dtype": "float32", "pretrain": {"max_steps": 4}}


def test_rows_hash_depends_on_rows_not_key_order():
    assert shipped.rows_sha256([{"a": 1, "b": 2}]) == shipped.rows_sha256([{"b": 2, "a": 1}])
    assert shipped.rows_sha256(PRETRAIN) != shipped.rows_sha256(PRETRAIN[::-1])
    assert shipped.rows_sha256(PRETRAIN) != shipped.rows_sha256(PRETRAIN[:1])


def test_first_difference_names_the_nested_key():
    assert shipped.first_difference({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}) == "a.c: shipped 2, config 3"
    assert shipped.first_difference({"a": 1}, {"a": 1, "z": 0}) == "z: shipped '(absent)', config 0"
    assert shipped.first_difference({"a": [1, 2]}, {"a": [1, 2]}) is None


def test_ship_writes_hub_style_files_and_the_record(shipped_dir):
    manifest = json.loads((shipped_dir / shipped.MANIFEST).read_text())
    names = set(manifest["files"])
    assert "base/config.json" in names and "sft_adapter/adapter_config.json" in names
    assert any(n.startswith("base/") and n.endswith(".safetensors") for n in names)
    assert any(n.startswith("sft_adapter/") and n.endswith(".safetensors") for n in names)
    assert not any(n.endswith(".bin") for n in names) and not (shipped_dir / "base/training_args.bin").exists()
    assert manifest["commit"] == "abc1234"
    assert manifest["data"] == {"pretrain_rows": 2, "pretrain_sha256": shipped.rows_sha256(PRETRAIN),
                                "sft_rows": 1, "sft_sha256": shipped.rows_sha256(SFT)}
    assert manifest["recipe"]["seed"] == 42 and manifest["recipe"]["system_prompt"] == "system"


def test_checks_pass_for_the_config_and_data_that_built_it(shipped_dir):
    manifest = shipped.read_manifest(shipped_dir)
    shipped.check_recipe(manifest, recipe(CONFIG, "system"))
    shipped.check_data(manifest, PRETRAIN, SFT)
    shipped.check_files(shipped_dir, manifest)


@pytest.mark.parametrize("change, named", [
    (lambda c: c["base"]["pretrain"].update(max_steps=5), "base.pretrain.max_steps: shipped 4, config 5"),
    (lambda c: c.update(seed=7), "seed: shipped 42, config 7"),
    (lambda c: c["corpus"].update(sft_slip_rate=0.2), "corpus.sft_slip_rate"),
    (lambda c: c["sft"]["lora"].update(r=8), "sft.lora.r"),
])
def test_a_changed_setting_is_refused_in_one_line_naming_it_and_the_fix(shipped_dir, change, named):
    config = copy.deepcopy(CONFIG)
    change(config)
    with pytest.raises(ConfigError) as refused:
        shipped.check_recipe(shipped.read_manifest(shipped_dir), recipe(config, "system"))
    message = str(refused.value)
    assert named in message and "snakemake --cores 2 base" in message and "base.source: scratch" in message
    assert "\n" not in message


def test_changed_data_or_an_edited_file_is_refused(shipped_dir):
    manifest = shipped.read_manifest(shipped_dir)
    with pytest.raises(ConfigError, match="the pretrain set .3 rows. differs"):
        shipped.check_data(manifest, PRETRAIN + [{"question": "q9", "answer": 1}], SFT)
    with pytest.raises(ConfigError, match="the sft set"):
        shipped.check_data(manifest, PRETRAIN, [{"question": "q3", "answer": 8}])
    (shipped_dir / "base/config.json").write_text("{}")
    with pytest.raises(ConfigError, match="base/config.json is missing or differs"):
        shipped.check_files(shipped_dir, manifest)


def test_missing_record_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="built_by.json is missing"):
        shipped.read_manifest(tmp_path)


def test_shipped_folder_loads_through_the_local_snapshot_path(shipped_dir, tmp_path):
    from thai_grpo.models.loading import load_policy

    fetch_model("local", shipped_dir / "base", None, tmp_path / "base", kind="base model")
    fetch_model("local", shipped_dir / "sft_adapter", None, tmp_path / "adapter", kind="adapter")
    policy = load_policy(tmp_path / "base", tmp_path / "adapter")
    assert type(policy).__name__ == "PeftModelForCausalLM"


def test_shipped_base_and_adapter_go_together():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["sft"]["source"] = "train"
    with pytest.raises(ConfigError, match="sft.source='train': the shipped SFT adapter was trained on the shipped base"):
        checked_config(config)


def test_the_shipped_folder_matches_the_default_config_and_stays_small():
    """assets/tiny-base (made by `make ship-base`) was built by config/config.yaml's recipe; a few MB in git."""
    folder = REPO / "assets/tiny-base"
    if not (folder / shipped.MANIFEST).exists():
        pytest.skip("assets/tiny-base not made yet: `make ship-base` after a run with base.source: scratch")
    from thai_grpo.data.prompts import SYSTEM_PROMPT

    config = load_config_files([REPO / "config/config.yaml"], REPO / "config/schema.yaml")
    manifest = shipped.read_manifest(folder)
    shipped.check_recipe(manifest, recipe(config, config["data"].get("system_prompt", SYSTEM_PROMPT)))
    shipped.check_files(folder, manifest)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert size < 8e6, f"assets/tiny-base is {size / 1e6:.1f} MB"

