#!/usr/bin/env bash
# Device check, one command on a GPU machine (`make gpu-check`, ~10 min at most): is this GPU usable, does the real
# config's path run on it, and how long does each stage take?
#   1. nvidia-smi and torch's view of the GPU (dtype and attention chosen by compute capability);
#   2. the real config (config/qwen3-0.6b.yaml) end to end on CUDA against a Hugging Face cache of stand-ins shaped
#      like Qwen3-0.6B but for depth and width (thai_grpo.models.rehearsal, the same as tests/test_real_config_rehearsal.py:
#      its config.json, the 151,936-token vocabulary with its special tokens, a hub adapter with dropout), tiny sizes:
#      every method of the chapter's comparison (SFT, GRPO, Dr.GRPO, RLOO, DPO, PPO with its reward model and with the
#      verifier); then each job's measured peak CUDA memory beside the memory plan's prediction for the same models
#      and sizes (thai_grpo.models.memory_plan; `make memory-plan` gives it for Qwen3-0.6B at the real sizes);
#   3. the smoke DAG (config/smoke.yaml) on CUDA.
# Each DAG runs in a scratch copy of the workflow (the repository's results/ are not touched); per-stage wall
# times and peak memory are printed from its results/benchmarks/*.tsv. Exits 2 when there is no usable GPU.
#   scripts/gpu_check.sh             the three steps above
#   CORES=8 scripts/gpu_check.sh     more cores for Snakemake (default 4)
# The real run itself (network or a filled hub cache): snakemake --cores 4 --configfile config/qwen3-0.6b.yaml
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CORES="${CORES:-4}"
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")"

# 1. A GPU, or stop with a clear message.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi missing or failing); run this on a GPU machine." >&2
  exit 2
fi
nvidia-smi

# The venv from the pinned lock (once), then torch's view: CUDA build, device, dtype/attention per capability.
make -C "$REPO" setup
PY="$REPO/.venv/bin/python"
"$PY" - <<'PYEOF'
import sys
import torch
from thai_grpo.core.accelerators import precision_summary
if not torch.cuda.is_available():
    sys.exit(f"gpu_check: torch {torch.__version__} sees no CUDA device (a CPU-only wheel, or a driver older "
             f"than CUDA {torch.version.cuda}?)")
capability = torch.cuda.get_device_capability(0)
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s); "
      f"GPU 0: {torch.cuda.get_device_name(0)}, sm_{capability[0]}{capability[1]}, "
      f"{torch.cuda.get_device_properties(0).total_memory / 2**30:.1f} GiB")
print("settings:", precision_summary(capability))
PYEOF

# One DAG in a fresh copy of the workflow: run_dag NAME SNAKEMAKE_ARGS...; prints its per-stage times.
run_dag() {
  local name="$1"; shift
  local work="$SCRATCH/$name"
  mkdir -p "$work"
  for item in Snakefile rules scripts config report envs profiles data; do cp -r "$REPO/$item" "$work/"; done
  echo "gpu_check: $name: snakemake --cores $CORES $*"
  local start=$(date +%s)
  (cd "$work" && "$REPO/.venv/bin/snakemake" --cores "$CORES" "$@")
  echo "gpu_check: $name finished in $(( $(date +%s) - start )) s (outputs in $work/results)"
  (cd "$work" && "$PY" - <<'PYEOF'
import csv
from pathlib import Path
rows = []
for path in Path("results/benchmarks").glob("*.tsv"):
    with path.open() as handle:
        row = next(csv.DictReader(handle, delimiter="\t"))
    rows.append((float(row["s"]), path.stem, row.get("max_rss", "NA")))
print(f"{'stage':<32}{'seconds':>10}{'max_rss MB':>12}")
for seconds, stage, rss in sorted(rows, reverse=True):
    print(f"{stage:<32}{seconds:>10.1f}{rss:>12}")
PYEOF
  )
}

# 2. The real config on CUDA, offline, against the stand-in cache (built on the CPU in seconds).
HF_CACHE="$SCRATCH/hf_home"
mkdir -p "$SCRATCH/real"
"$PY" -m thai_grpo.models.rehearsal "$HF_CACHE" "$SCRATCH/real/tiny.yaml"
(
  unset HF_HUB_CACHE HF_DATASETS_CACHE
  export HF_HOME="$HF_CACHE" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  export THAI_GRPO_CUDA_PEAKS="$SCRATCH/cuda_peaks"   # each GPU job writes its peak CUDA memory there
  run_dag real --configfile config/qwen3-0.6b.yaml "$SCRATCH/real/tiny.yaml"
)
echo "gpu_check: peak CUDA memory per job (torch.cuda.max_memory_allocated) beside the memory plan:"
"$PY" "$REPO/scripts/memory_plan.py" --compare "$SCRATCH/cuda_peaks" "$SCRATCH/real/results/model/base" \
  "$SCRATCH/real/results/model/sft_adapter" "$SCRATCH/real/tiny.yaml"

# 3. The smoke DAG on CUDA.
run_dag smoke --configfile config/smoke.yaml
echo "gpu_check: done; logs of every stage under $SCRATCH/*/results/logs"
