#!/usr/bin/env bash
# scripts/gpu_venv.sh PYTHON WHEELS VENV: a venv at VENV that sees PYTHON's packages (the machine's CUDA torch), with
# the wheels listed in WHEELS/requirements.txt installed over them (no index, no resolver). `make gpu-check` builds
# .venv-gpu with it where .venv has no CUDA torch. Exits 1 with one line, and no VENV left, where the wheels do not
# install.
set -euo pipefail
PYTHON="$1" WHEELS="$2" VENV="$3"

"$PYTHON" -m venv --system-site-packages "$VENV"
# --system-site-packages shows the base interpreter's packages only: where PYTHON is itself a venv or a conda env (its
# torch in its own site-packages), a .pth file adds PYTHON's site-packages, behind the venv's own
"$PYTHON" -c 'import site; print("\n".join(site.getsitepackages()))' \
  > "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/machine-site-packages.pth"
"$VENV/bin/pip" install --quiet --no-index --find-links "$WHEELS" --no-deps -r "$WHEELS/requirements.txt" \
  || { rm -rf "$VENV"; echo "gpu_check: the wheels in $WHEELS do not install for $("$PYTHON" -V) here: rerun \
\`make wheels\` with this Python and platform" >&2; exit 1; }
