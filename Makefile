# The two commands of the README:  `make demo` (the CPU demo, end to end)  and  `make test`.
# Both create the virtual environment on first use and are idempotent.
SHELL := /bin/bash
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed
# Rules call `pdelra`, `snakemake`, `dvc`, `papermill` from the project's environment.
export PATH := $(BIN):$(PATH)
export DVC_NO_ANALYTICS := 1
# pip repeats this harmless line for every package when a configured find-links folder lacks it.
PIP_NOISE := is ignored: it is neither a file nor a directory

.PHONY: demo test test-tools venv lint clean-demo

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	set -o pipefail; $(BIN)/pip install --quiet --upgrade pip 2>&1 | { grep -v "$(PIP_NOISE)" || true; }
	set -o pipefail; $(BIN)/pip install --quiet -e '.[dev]' 2>&1 | { grep -v "$(PIP_NOISE)" || true; }
	$(BIN)/python -m ipykernel install --sys-prefix --name pdelra --display-name "pdelra (.venv)"
	touch $(STAMP)

venv: $(STAMP)

# One fork server imports torch once for all of the demo's training/diagnose jobs (pdelra.forkserver).
demo: $(STAMP)
	$(BIN)/pdelra forkserver run -- $(BIN)/snakemake --workflow-profile workflow/profiles/default \
		--configfile config/demo.yaml

# The Debian tools tests use: pdflatex (Debian's TeX) compiles the report's LaTeX tables. Installed when
# missing and possible (apt-get as root); otherwise those tests skip and say why.
TEX_PACKAGES := texlive-latex-base texlive-latex-recommended
test-tools:
	@{ command -v pdflatex && kpsewhich booktabs.sty pdflscape.sty; } >/dev/null 2>&1 || { \
		if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
			echo "make: pdflatex is missing and cannot be installed here (needs apt-get as root)"; \
		else \
			echo "make: installing $(TEX_PACKAGES) for the LaTeX tests"; \
			export DEBIAN_FRONTEND=noninteractive; \
			log=$$( { apt-get update -qq && apt-get install -y -qq --no-install-recommends \
				$(TEX_PACKAGES); } 2>&1 ) || echo "make: could not install them: $$(tail -n 3 <<< "$$log")"; \
		fi; }

test: $(STAMP) test-tools
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/snakemake --lint --workflow-profile workflow/profiles/default --configfile config/demo.yaml

clean-demo:
	rm -rf results/demo data/demo
