"""`make ship-base`: the shipped base and SFT adapter (assets/tiny-base/) recreated from a scratch build: the hub-style
files of FROM/base and FROM/sft_adapter, and built_by.json (the config's recipe, the data's hashes, the commit;
thai_grpo_tools.ship). FROM: results/model after a run with base.source: scratch, results/model/scratch after
`snakemake --cores 2 base` with base.source: shipped."""

import argparse
import subprocess
from pathlib import Path

from thai_grpo.core.io import read_jsonl
from thai_grpo.data.prompts import SYSTEM_PROMPT
from thai_grpo.workflow import load_config_files as load_config
from thai_grpo_tools.ship import ship

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", default="results/model", help="folder with base/ and sft_adapter/")
    parser.add_argument("--data", default="results/data", help="folder with pretrain.jsonl and sft.jsonl")
    parser.add_argument("--configfile", nargs="+", default=["config/config.yaml"])
    parser.add_argument("--commit", default=None, help="the commit that built the files (default: git HEAD)")
    parser.add_argument("--out", default="assets/tiny-base")
    args = parser.parse_args()
    config = load_config(args.configfile, ROOT / "config/schema.yaml")
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
