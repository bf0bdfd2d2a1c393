# Two commands: `make run` (the whole pipeline, offline default config) and `make test` (the test suite).
# Both build .venv on first use from the pinned lock, and reuse it while requirements.txt is unchanged.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.txt pyproject.toml | sha1sum | cut -c1-12)
# Every core by default: a job's threads are fixed per job (1 or 2, rules/common.smk), so more cores run more jobs
# side by side and change no number; `make run CORES=2` caps it.
CORES ?= all
# Test workers (pytest-xdist): one per core; each test file stays on one worker (its module fixtures are built once).
TEST_WORKERS ?= auto

.PHONY: setup run test test-fast bench browser lint gpu-check memory-plan clean ship-base

setup: $(STAMP)

# Bytecode is compiled after the install, on every core, not file by file by pip; like pip, it passes over the files
# written for a newer Python (torch's py312-only test helpers), which compileall reports as failures. The resolver
# stays: on a GPU machine it brings torch's CUDA libraries, which the CPU lock does not list.
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --no-compile -r requirements.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	$(BIN)/python -m compileall -qq -j 0 $(VENV)/lib || true
	rm -f $(VENV)/.installed-*
	touch $@

run: setup
	$(BIN)/snakemake --cores $(CORES)

# Where the time goes on this machine: sampler vs its forward-pass bound, one step of GRPO, Dr.GRPO, PPO and DPO and
# held-out sampling split into their parts, each stage's share of the last run, the last run's critical path and its
# wall time extrapolated to 1-16 cores, and the smoke DAG timed at 1 and 2 cores (results/bench/bench.json). Builds
# the base, SFT adapter, preference pairs and reward model first if needed.
bench: setup
	$(BIN)/snakemake --cores $(CORES) results/model/sft_adapter results/data/train.jsonl results/model/reward_model --quiet progress
	$(BIN)/python scripts/bench.py

# The shipped base and SFT adapter (assets/tiny-base/, base.source: shipped) recreated from a scratch build:
# FROM=results/model after a run with base.source: scratch and sft.source: train; FROM=results/model/scratch after
# `snakemake --cores 2 base` under base.source: shipped. Records the config, data hashes and COMMIT (default HEAD).
FROM ?= results/model
ship-base: setup
	$(BIN)/python scripts/ship_base.py --from $(FROM) $(if $(COMMIT),--commit $(COMMIT))

# Headless Chromium for the report's browser tests, and a Thai font (TLWG) so their screenshots show Thai glyphs,
# not boxes; the tests skip, or the Thai-glyph test fails naming the package, where these cannot be installed.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && fc-list :lang=th | grep -q . || \
	  { (apt-get update -qq && apt-get install -y -qq chromium chromium-driver fonts-thai-tlwg) >/dev/null 2>&1 || \
	    echo "note: could not install chromium + chromium-driver + fonts-thai-tlwg; browser tests will skip or fail"; }

test: setup browser lint
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-fast: setup
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow and not browser"

# Snakemake's own checks (seconds): its linter on the workflow, and snakefmt's formatting of the Snakefile and rules
# (`snakefmt Snakefile rules/` rewrites them; line length in pyproject.toml). Part of `make test`.
lint: setup
	$(BIN)/lint-imports --no-cache
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check Snakefile rules/

# On a GPU machine (~10 min at most): nvidia-smi, torch's CUDA view, the real config's DAG on CUDA against a cache of
# stand-ins shaped like Qwen3-0.6B (thai_grpo.models.rehearsal), each job's peak CUDA memory beside the memory plan, then the
# smoke DAG, with per-stage times (docs/real-run.md). On a machine without a GPU it stops with one line (exit 2).
gpu-check:
	bash scripts/gpu_check.sh

# The real config's peak GPU memory per stage for Qwen3-0.6B on a 16 GB T4, computed (thai_grpo.models.memory_plan), not
# measured: results/memory_plan/plan.json and plan.md; then the formula against peaks measured on CPU stand-ins.
memory-plan: setup
	$(BIN)/python scripts/memory_plan.py results/memory_plan
	$(BIN)/python scripts/memory_plan.py --check

clean:
	rm -rf results .snakemake

# The README's and docs' generated tables (thai_grpo.report.reference, scripts/docs.py): `make docs` rewrites them from the
# reference run's summaries in docs/reference/; `make docs-reference` first summarises results/ into docs/reference/
# (TIME=FILE: `time make run`'s output, for the wall time); `make compare` diffs your results/ against the reference.
.PHONY: docs docs-reference compare

docs: setup
	$(BIN)/python scripts/docs.py render

docs-reference: setup
	$(BIN)/python scripts/docs.py summarise $(if $(TIME),--time-file $(TIME))
	$(BIN)/python scripts/docs.py render

compare: setup
	$(BIN)/python scripts/docs.py compare
