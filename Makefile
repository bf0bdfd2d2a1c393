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

# `make help`: every target with its line (the `## ` text after its name).
.PHONY: help setup run test test-fast bench bench-sampling browser slurm lint gpu-check memory-plan rehearse-full wheels clean ship-base

help:  ## every target with its line (this list)
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/\1\t\2/' | expand -t 16

setup: $(STAMP)  ## build .venv from the pinned lock (every other target does it first)

# uv installs the pinned lock (6 s here, pip 37 s: it unpacks the wheels in parallel) from the sources pip is
# configured with (scripts/uv_sources.py); pip does it where uv cannot be had. Both resolve: on a GPU machine that
# brings torch's CUDA libraries, which the CPU lock does not list. Bytecode is compiled after the install, on every
# core, but for what the pipeline and the tests never import (the libraries' own tests, pip, setuptools, and
# transformers' other model families: 40% of the files, 10 s here); a module left out compiles when first imported.
# Like pip, compileall passes over the files written for a newer Python, which it reports as failures.
# The lock needs Python >= 3.11 (pyproject.toml's requires-python): an older one stops here with one line, before any
# venv or install (pip's resolver would fail later with a long error).
SETUP_PYTHON = $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
UV_VERSION := 0.13.9
NOT_COMPILED := /tests/|/site-packages/(pip|setuptools)/|/transformers/models/(?!auto/|qwen2/|qwen3/|bloom/|encoder_decoder/|__init__)
MIN_PYTHON := 3.11
MIN_MAJOR := $(word 1,$(subst ., ,$(MIN_PYTHON)))
MIN_MINOR := $(word 2,$(subst ., ,$(MIN_PYTHON)))
$(STAMP): requirements.txt pyproject.toml
	@version="$$($(SETUP_PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')" || exit 1; \
	major="$${version%%.*}"; minor="$${version#*.}"; \
	if [ "$$major" -lt $(MIN_MAJOR) ] || { [ "$$major" -eq $(MIN_MAJOR) ] && [ "$$minor" -lt $(MIN_MINOR) ]; }; then \
	  echo "make setup: $(SETUP_PYTHON) is Python $$version; the pinned lock needs Python >= $(MIN_PYTHON): \
	install one and run \`make setup PYTHON=python$(MIN_PYTHON)\` (or newer)" >&2; exit 1; \
	fi
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION) && \
	  $(BIN)/uv pip install --quiet --python $(BIN)/python $$($(BIN)/python scripts/uv_sources.py) \
	    -r requirements.txt -e . || \
	  { $(BIN)/pip install --quiet --disable-pip-version-check --no-compile -r requirements.txt && \
	    $(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .; }
	$(BIN)/python -m compileall -qq -j 0 -x '$(NOT_COMPILED)' $(VENV)/lib || true
	rm -f $(VENV)/.installed-*
	touch $@

run: setup  ## the whole pipeline on the offline default config -> results/report.html
	$(BIN)/snakemake --cores $(CORES)

# Where the time goes on this machine: one step of GRPO, Dr.GRPO, PPO and DPO and held-out sampling split into
# their parts (results/bench/bench.json). Builds the base, SFT adapter, preference pairs and reward model first if needed.
bench: setup  ## where the time goes: one step of each method split into its parts
	$(BIN)/snakemake --cores $(CORES) results/model/sft_adapter results/data/train.jsonl results/model/reward_model --quiet progress
	$(BIN)/python -m thai_grpo_tools.bench

bench-sampling: setup  ## held-out sampling timed on the real config's stand-ins, and a decode step's host work
	$(BIN)/python -m thai_grpo_tools.sampling_bench

# The shipped base and SFT adapter (assets/tiny-base/, base.source: shipped) recreated from a scratch build:
# FROM=results/model after a run with base.source: scratch and sft.source: train; FROM=results/model/scratch after
# `snakemake --cores 2 base` under base.source: shipped. Records the config, data hashes and COMMIT (default HEAD).
FROM ?= results/model
ship-base: setup  ## recreate the shipped tiny base and SFT adapter from a scratch build (FROM=...)
	$(BIN)/python -m thai_grpo_tools.ship_base --from $(FROM) $(if $(COMMIT),--commit $(COMMIT))

# Headless Chromium for the report's browser tests, and a Thai font (TLWG) so their screenshots show Thai glyphs,
# not boxes; the tests skip, or the Thai-glyph test fails naming the package, where these cannot be installed.
browser:  ## headless Chromium and a Thai font for the report's browser tests
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && fc-list :lang=th | grep -q . || \
	  { (apt-get update -qq && apt-get install -y -qq chromium chromium-driver fonts-thai-tlwg) >/dev/null 2>&1 || \
	    echo "note: could not install chromium + chromium-driver + fonts-thai-tlwg; browser tests will skip or fail"; }

# Debian's Slurm (slurmctld, slurmd, the client commands) and munge for the test that runs profiles/slurm on a one-node
# Slurm it starts and stops itself, in a folder of its own (tests/slurm_cluster.py); it skips, naming this target, where
# these cannot be installed. The packages' own services are not used (under systemd, Debian may start munge's).
slurm:  ## Debian's slurm-wlm and munge for the test that runs the SLURM profile on a real one-node Slurm
	@PATH="$$PATH:/usr/sbin:/sbin" sh -c 'command -v sbatch && command -v slurmctld && command -v slurmd && \
	  command -v munged' >/dev/null || \
	  { (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      slurm-wlm munge) >/dev/null 2>&1 || \
	    echo "note: could not install slurm-wlm + munge; the Slurm test will skip"; }

test: setup browser slurm lint  ## the test suite as CI runs it: venv, headless Chromium, Slurm, linters, pytest
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test-fast: setup  ## the suite without the slow pipeline runs and the browser tests
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow and not browser"

# Snakemake's own checks (seconds): its linter on the workflow, and snakefmt's formatting of the Snakefile and rules
# (`snakefmt Snakefile rules/` rewrites them; line length in pyproject.toml). Part of `make test`.
lint: setup  ## snakemake --lint, snakefmt --check, lint-imports
	$(BIN)/lint-imports --no-cache
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check Snakefile rules/

# On a GPU machine, no network needed: nvidia-smi, torch's CUDA view (.venv's, or the machine's own CUDA torch with
# the other pins from `make wheels`), then Qwen3-0.6B at full size (the real weights
# where the hub cache holds them, else random ones) through every stage at the chapter's sizes, `auto` as this card
# chooses it, in float16 (a T4's path), the trainers in bfloat16: each stage's peak reserved CUDA memory
# beside the memory plan, its s/step, its loss and lost and redone updates (results/gpu_check/, docs/real-run.md); on a
# card larger than a T4, float16 once more within a T4's 14.75 GiB. Without a GPU it stops with one line (exit 2).
gpu-check:  ## on a GPU machine: every stage at the chapter's sizes, peak memory against the plan
	bash scripts/gpu_check.sh

# Every pinned package but torch as wheels in $(WHEELS)/ (with the list they install from), for `make gpu-check` on a
# GPU machine without network: run it where pip reaches PyPI, with the GPU machine's Python version and platform (or
# pass pip's --python-version/--platform/--only-binary=:all: in WHEEL_ARGS), then copy the folder there.
WHEELS ?= wheels
PIP_DOWNLOAD ?= $(PYTHON) -m pip download
wheels:  ## every pin but torch as wheels, for a GPU machine without network
	mkdir -p $(WHEELS)
	grep -v '^torch==' requirements.txt > $(WHEELS)/requirements.txt
	$(PIP_DOWNLOAD) --no-deps --prefer-binary --dest $(WHEELS) $(WHEEL_ARGS) -r $(WHEELS)/requirements.txt
	$(PIP_DOWNLOAD) --no-deps --prefer-binary --dest $(WHEELS) $(WHEEL_ARGS) setuptools wheel  # builds a source-only pin offline

# The real config's peak GPU memory per stage for Qwen3-0.6B on a 16 GB T4, computed (thai_grpo_tools.memory_plan),
# not measured: results/memory_plan/plan.json and plan.md (tests/test_memory_measured.py holds it against each stage).
memory-plan: setup  ## the real config's planned GPU memory per stage
	$(BIN)/python -m thai_grpo_tools.memory_plan results/memory_plan

# A benchmark, not a test (~20 min on 2 cores): Qwen3-0.6B at full width and depth (random weights, no download)
# through every stage on the CPU, one optimizer step each at small rows and lengths; each stage's peak RSS beside the
# memory plan's CPU prediction at exactly those sizes, and its s/step (results/rehearse_full/rehearse.json and .md).
# THREADS=1 on a machine others share (threads waiting on each other are slower than one).
rehearse-full: setup  ## the real config end to end on full-size stand-ins (CPU, slow)
	$(BIN)/python -m thai_grpo_tools.rehearse_full --out results/rehearse_full $(if $(THREADS),--threads $(THREADS))

clean:  ## delete results/ and .snakemake/
	rm -rf results .snakemake

# The README's and docs' generated tables (thai_grpo_tools.reference): `make docs` rewrites them from the
# reference run's summaries in docs/reference/; `make docs-reference` first summarises results/ into docs/reference/
# (TIME=FILE: `time make run`'s output, for the wall time); `make compare` diffs your results/ against the reference.
# `make compare BEFORE=DIR` compares two of your own runs instead (thai_grpo_tools.compare_runs): DIR (a
# `cp -r results` kept before a change) against results/ (AFTER=DIR for another), per model pass@1 before and after on the same
# held-out problems, the paired difference with its bootstrap interval, and the config keys that differ.
.PHONY: docs docs-reference compare

docs: setup  ## rewrite the generated tables of README.md and docs/ from docs/reference/
	$(BIN)/python -m thai_grpo_tools.reference render

docs-reference: setup  ## summarise results/ into docs/reference/ (TIME=file: time make run's output), then make docs
	$(BIN)/python -m thai_grpo_tools.reference summarise $(if $(TIME),--time-file $(TIME))
	$(BIN)/python -m thai_grpo_tools.reference render

compare: setup  ## your results/ against the reference run, within its spread (BEFORE=DIR: against your own run)
	$(if $(BEFORE),$(BIN)/python -m thai_grpo_tools.compare_runs --before $(BEFORE) $(if $(AFTER),--after $(AFTER)),\
	$(BIN)/python -m thai_grpo_tools.reference compare)
