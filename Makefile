# The commands of the README:  `make demo` (the CPU demo, end to end),  `make test`  and  `make test-fast`.
# Each creates the virtual environment on first use; all are idempotent.
SHELL := /bin/bash
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed
# Rules call `pdelra`, `snakemake`, `dvc`, `papermill` from the project's environment.
export PATH := $(BIN):$(PATH)
export DVC_NO_ANALYTICS := 1
# pip repeats this harmless line for every package when a configured find-links folder lacks it.
PIP_NOISE := is ignored: it is neither a file nor a directory

.PHONY: demo test test-fast test-tools venv lint clean-demo

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	set -o pipefail; $(BIN)/pip install --quiet --upgrade pip 2>&1 | { grep -v "$(PIP_NOISE)" || true; }
	set -o pipefail; $(BIN)/pip install --quiet --no-compile -e '.[dev]' 2>&1 | { grep -v "$(PIP_NOISE)" || true; }
	@# pip byte-compiles what it installs on one core (about 45 of its 80 s here); compileall does it on every
	@# core. Like pip, it passes over the few files that are not Python 3.11 (torch's py312 test helpers).
	$(BIN)/python -m compileall -qq -j 0 $(VENV)/lib || true
	$(BIN)/python -m ipykernel install --sys-prefix --name pdelra --display-name "pdelra (.venv)"
	touch $(STAMP)

venv: $(STAMP)

# One fork server imports torch once for all of the demo's training/diagnose jobs (pdelra.forkserver).
# Then the demo checks what it is for: every task's baseline learns, every headline claim has our number
# (tests/test_demo_learns.py, a few seconds on the tables it wrote).
demo: $(STAMP)
	$(BIN)/pdelra forkserver run -- $(BIN)/snakemake --workflow-profile workflow/profiles/default \
		--configfile config/demo.yaml
	$(BIN)/pytest -q -p no:cacheprovider tests/test_demo_learns.py

# The Debian tools the tests use (TeX, Chromium, the Slurm daemons), installed before the tests start when
# missing and possible: scripts/install-test-tools.sh says which and why.
test-tools:
	@scripts/install-test-tools.sh

# Three workers (pytest-xdist) on two cores: the Slurm tests' module, one worker's unit of about 8 minutes,
# mostly waits on the cluster (time limits, requeues), and with two workers its core sat idle meanwhile
# (1.3 cores busy on average; docs/measurements.md). tests/conftest.py groups the tests so that each module
# (and the tests sharing one trained workspace) stays on one worker, the longest groups first.
test: $(STAMP) test-tools
	$(BIN)/pytest -n 3

# The loop while changing the code: every test not marked slow (no end-to-end Snakemake, Slurm, DVC or
# training-process run), on two workers; meant to take under 3 minutes on 2 cores
# (docs/measurements.md).
test-fast: $(STAMP)
	$(BIN)/pytest -n 2 -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/snakemake --lint --workflow-profile workflow/profiles/default --configfile config/demo.yaml

clean-demo:
	rm -rf results/demo data/demo
