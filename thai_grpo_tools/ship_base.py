"""`make ship-base`: the shipped base and SFT adapter (assets/tiny-base/) recreated from a scratch build: the hub-style
files of FROM/base and FROM/sft_adapter, and built_by.json (the config's recipe, the data's hashes, the commit), the
record thai_grpo.core.shipped checks a run against. FROM: results/model after a run with base.source: scratch,
results/model/scratch after `snakemake --cores 2 base` with base.source: shipped."""

import argparse
import subprocess
from pathlib import Path

from thai_grpo.core.hub import copy_allowed
from thai_grpo.core.io import atomic_directory, read_jsonl, require_model_dir, write_json
from thai_grpo.core.shipped import ADAPTER_DIR, BASE_DIR, MANIFEST, data_record, file_sha256
from thai_grpo.data.prompts import SYSTEM_PROMPT
from thai_grpo.workflow import load_config_files, recipe

ROOT = Path(__file__).resolve().parent.parent


def ship(base_dir: str | Path, adapter_dir: str | Path, out_dir: str | Path, config: dict, system_prompt: str,
         pretrain_rows: list[dict], sft_rows: list[dict], commit: str) -> dict:
    """(Re)create ``out_dir`` whole: ``base/`` and ``sft_adapter/`` (hub-style files only) and ``built_by.json`` (the
    recipe, the data hashes, the commit, the files' hashes), which it returns."""
    with atomic_directory(out_dir) as tmp:
        for source, name, kind in ((base_dir, BASE_DIR, "base model"), (adapter_dir, ADAPTER_DIR, "adapter")):
            copy_allowed(require_model_dir(source, kind), tmp / name)
        files = {p.relative_to(tmp).as_posix(): file_sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        manifest = {"recipe": recipe(config, system_prompt), "data": data_record(pretrain_rows, sft_rows),
                    "commit": commit, "files": dict(sorted(files.items()))}
        write_json(tmp / MANIFEST, manifest)
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", default="results/model", help="folder with base/ and sft_adapter/")
    parser.add_argument("--data", default="results/data", help="folder with pretrain.jsonl and sft.jsonl")
    parser.add_argument("--configfile", nargs="+", default=["config/config.yaml"])
    parser.add_argument("--commit", default=None, help="the commit that built the files (default: git HEAD)")
    parser.add_argument("--out", default="assets/tiny-base")
    args = parser.parse_args()
    config = load_config_files(args.configfile, ROOT / "config/schema.yaml")
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                           text=True, check=True).stdout.strip()
    data = Path(args.data)
    manifest = ship(Path(args.source) / "base", Path(args.source) / "sft_adapter", args.out, config,
                    config["data"].get("system_prompt", SYSTEM_PROMPT), read_jsonl(data / "pretrain.jsonl"),
                    read_jsonl(data / "sft.jsonl"), commit)
    size = sum(p.stat().st_size for p in Path(args.out).rglob("*") if p.is_file())
    print(f"wrote {args.out}: {len(manifest['files'])} files + built_by.json, {size / 1e6:.1f} MB; "
          f"pretrain {manifest['data']['pretrain_rows']} rows, sft {manifest['data']['sft_rows']} rows, "
          f"commit {manifest['commit']}")


if __name__ == "__main__":
    main()
