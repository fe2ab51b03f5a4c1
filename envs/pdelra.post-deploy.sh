#!/usr/bin/env bash
# Run by `snakemake --sdm conda` inside the new environment, from the workflow's working directory (the
# repository root): install the project itself (its pinned dependencies are already in the env) and register the
# notebook kernel `pdelra` that `pdelra report` asks papermill for.
set -euo pipefail
python -m pip install --no-deps --no-build-isolation -e .
python -m ipykernel install --sys-prefix --name pdelra --display-name "pdelra (conda)"
