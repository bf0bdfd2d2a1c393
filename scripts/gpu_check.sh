#!/usr/bin/env bash
# Device check: is this GPU usable, and how long does each stage take on it?
#   scripts/gpu_check.sh [CONFIG]      (default config/smoke.yaml: the whole DAG with toy sizes, minutes)
#   CORES=8 scripts/gpu_check.sh config/qwen3-0.6b.yaml   (the real run; needs the hub or a filled cache)
# Prints nvidia-smi and torch's view of the GPU, builds .venv if needed (make setup), runs the pipeline on
# CUDA in a scratch copy of the workflow (the repository's results/ are not touched) and prints per-rule
# wall times from results/benchmarks/*.tsv. Exits 2 when there is no usable GPU.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONFIG="${1:-config/smoke.yaml}"
CORES="${CORES:-4}"

# 1. A GPU, or stop with a clear message.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi missing or failing); run this on a GPU machine." >&2
  exit 2
fi
nvidia-smi

# 2. The venv from the pinned lock (once), then torch's view: CUDA build, device, dtype/attention per capability.
make -C "$REPO" setup
PY="$REPO/.venv/bin/python"
"$PY" - <<'EOF'
import sys
import torch
from thai_grpo.accelerators import precision_summary
if not torch.cuda.is_available():
    sys.exit(f"gpu_check: torch {torch.__version__} sees no CUDA device (a CPU-only wheel, or a driver older "
             f"than CUDA {torch.version.cuda}?)")
capability = torch.cuda.get_device_capability(0)
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s); "
      f"GPU 0: {torch.cuda.get_device_name(0)}, sm_{capability[0]}{capability[1]}, "
      f"{torch.cuda.get_device_properties(0).total_memory / 2**30:.1f} GiB")
print("settings:", precision_summary(capability))
EOF

# 3. The pipeline end to end in a scratch copy (same files as tests/test_pipeline.py copies).
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")"
for name in Snakefile rules scripts config report envs profiles; do cp -r "$REPO/$name" "$WORK/"; done
cd "$WORK"
start=$(date +%s)
"$REPO/.venv/bin/snakemake" --cores "$CORES" --configfile "$CONFIG"
echo "gpu_check: pipeline finished in $(( $(date +%s) - start )) s (outputs in $WORK/results)"

# 4. Per-rule wall time and peak memory, slowest first (Snakemake's benchmark files: s, max_rss in MB).
"$PY" - <<'EOF'
import csv
from pathlib import Path
rows = []
for path in Path("results/benchmarks").glob("*.tsv"):
    with path.open() as handle:
        row = next(csv.DictReader(handle, delimiter="\t"))
    rows.append((float(row["s"]), path.stem, row.get("max_rss", "NA")))
print(f"{'stage':<24}{'seconds':>10}{'max_rss MB':>12}")
for seconds, stage, rss in sorted(rows, reverse=True):
    print(f"{stage:<24}{seconds:>10.1f}{rss:>12}")
EOF
