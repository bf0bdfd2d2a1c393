#!/usr/bin/env bash
# Device check, one command on a GPU machine (`make gpu-check`, no network):
#   1. nvidia-smi, then a Python whose torch sees CUDA: .venv where `make setup` built it with a CUDA torch; else the
#      machine's own CUDA torch (PYTHON, default python3) in .venv-gpu, a venv that sees it, with every other pinned
#      package installed from the wheels `make wheels` downloaded beforehand (WHEELS, default wheels/). The first line
#      says which torch is measured (version, CUDA build), and that it is not .venv's where it fell back;
#   2. torch's view of the GPU and the settings the pipeline picks there (thai_grpo.jobs.devices);
#   3. Qwen3-0.6B at full size through every stage of the chapter's comparison at the chapter's batch sizes and lengths,
#      `auto` sizes as this card chooses them, one optimizer step each (thai_grpo_tools.rehearse_full --preset chapter):
#      the real base and SFT adapter where the hub cache holds them, else random weights built here (the first line of
#      its table says which; no download either way); once forced to float16 (a T4's path: THAI_GRPO_CAPABILITY=7.5),
#      the trainers once more in bfloat16 where the GPU has it (compute capability 8.0 or later). Each stage's peak
#      CUDA memory held by the allocator (max_memory_reserved, expandable segments on) beside the memory plan's
#      prediction for those sizes, its seconds per step, and for a training stage whether its
#      loss stayed finite and which updates were lost or redone (float16's loss scaler, non-finite gradients), in
#      OUT/<pass>/rehearse.json (OUT default results/gpu_check). GRPO makes three steps (float16's loss scale calibrates
#      there); a decode stage stops a third of its problems early, so the decode loop compacts its cache; each
#      stage sizes `auto` with the jobs' own code after noting the free memory, and fails where that is not the plan's;
#      On a card larger than a T4, float16 again within a T4's 14.75 GiB (OUT/float16-t4).
# Exits 2 with one line where there is no usable GPU or no CUDA torch; 1 when a stage failed.
#   scripts/gpu_check.sh                     the steps above
#   PASSES=float16 scripts/gpu_check.sh      one pass only (float16, bfloat16, float16-t4)
# The real run itself: snakemake --cores 4 --configfile config/qwen3-0.6b.yaml
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$REPO/results/gpu_check}"
WHEELS="${WHEELS:-$REPO/wheels}"
PYTHON="${PYTHON:-python3}"
STAGE_TIMEOUT="${STAGE_TIMEOUT:-300}"

die() { echo "gpu_check: $*" >&2; exit 2; }
has_cuda_torch() { "$1" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; }
torch_label() {  # "torch 2.5.1+cu124, CUDA 12.4 build" / "torch 2.13.0+cpu, CPU build" / "no torch"
  "$1" -c 'import torch; cuda = torch.version.cuda
print(f"torch {torch.__version__}, " + (f"CUDA {cuda} build" if cuda else "CPU build"))' 2>/dev/null || echo "no torch"
}

# 1. A GPU, then a Python with a CUDA torch (.venv's own, or, said in the first line, the machine's in .venv-gpu), or
#    stop with one line.
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 \
  || die "no NVIDIA GPU here (nvidia-smi missing or failing); run this on a GPU machine"

if [ -x "$REPO/.venv/bin/python" ] && has_cuda_torch "$REPO/.venv/bin/python"; then
  PY="$REPO/.venv/bin/python"
  echo "gpu_check: measuring .venv's own $(torch_label "$PY")"
  nvidia-smi -L
elif command -v "$PYTHON" >/dev/null 2>&1 && has_cuda_torch "$PYTHON"; then
  if [ -x "$REPO/.venv/bin/python" ]; then VENV_TORCH="$(torch_label "$REPO/.venv/bin/python") sees no CUDA GPU"
  else VENV_TORCH="does not exist"; fi
  echo "gpu_check: FELL BACK to .venv-gpu: .venv's torch $VENV_TORCH, so this measures $PYTHON's \
$(torch_label "$PYTHON") (rerun \`make setup\` with a CUDA torch to measure .venv itself)"
  nvidia-smi -L
  if [ -x "$REPO/.venv-gpu/bin/python" ] && ! has_cuda_torch "$REPO/.venv-gpu/bin/python"; then
    rm -rf "$REPO/.venv-gpu"  # made by an older check that did not see PYTHON's torch
  fi
  if [ ! -x "$REPO/.venv-gpu/bin/python" ]; then
    [ -f "$WHEELS/requirements.txt" ] || die "no wheels in $WHEELS: run \`make wheels\` where pip reaches PyPI (same \
Python and platform as this machine) and copy wheels/ here, or \`make setup\` with network"
    bash "$REPO/scripts/gpu_venv.sh" "$PYTHON" "$WHEELS" "$REPO/.venv-gpu" || exit 2
  fi
  PY="$REPO/.venv-gpu/bin/python"
  export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"  # the package from the working tree, not installed
else
  nvidia-smi -L
  die "no Python with a CUDA build of torch here (.venv has $("$REPO/.venv/bin/python" -c 'import torch; \
print("torch", torch.__version__)' 2>/dev/null || echo none), PYTHON=$PYTHON has none): install the machine's CUDA torch \
or run \`make setup\` with network"
fi

# 2. torch's view: CUDA build, device, the settings per capability, the torch the lock pins.
cd "$REPO"
CAPABILITY="$("$PY" - <<'PYEOF'
import sys
import torch
from thai_grpo_tools.gpu_settings import precision_summary
capability = torch.cuda.get_device_capability(0)
locked = next(line.split("==")[1].strip() for line in open("requirements.txt") if line.startswith("torch=="))
print(f"torch {torch.__version__} (the lock pins {locked}), CUDA {torch.version.cuda}, {torch.cuda.device_count()} "
      f"GPU(s); GPU 0: {torch.cuda.get_device_name(0)}, sm_{capability[0]}{capability[1]}, "
      f"{torch.cuda.get_device_properties(0).total_memory / 2**30:.1f} GiB", file=sys.stderr)
print("settings:", precision_summary(capability), file=sys.stderr)
print(f"{capability[0]}.{capability[1]}")
PYEOF
)"

# 3. Every stage at the chapter's sizes, per pass (thai_grpo_tools.rehearse_full.GPU_CHECK_PASSES).
#    float16 on every card from a T4 on; the trainers in bfloat16 from 8.0; on a card larger than a T4,
#    float16 again within a T4's 14.75 GiB, `auto` sized for that as the jobs size it, so a plan that undercounts a
#    T4 fails here.
if [ -z "${PASSES:-}" ]; then
  case "$CAPABILITY" in 7.5|[89].*|[1-9][0-9].*) PASSES="float16" ;; *) PASSES="auto" ;; esac
  case "$CAPABILITY" in [89].*|[1-9][0-9].*) PASSES="$PASSES bfloat16" ;; esac
  "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.get_device_properties(0).total_memory > 15.5 * 2**30 else 1)' \
    && PASSES="$PASSES float16-t4"
fi
status=0
for pass in $PASSES; do
  echo "gpu_check: the chapter's sizes, pass $pass"
  "$PY" -m thai_grpo_tools.rehearse_full --device cuda --preset chapter --pass "$pass" --out "$OUT/$pass" \
    --work "$OUT/work-$pass" --timeout "$STAGE_TIMEOUT" || status=1
done
echo "gpu_check: done; tables in $OUT/*/rehearse.md"
exit "$status"
