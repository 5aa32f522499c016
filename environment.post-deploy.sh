#!/usr/bin/env bash
# Run inside the environment created from environment.yml (Snakemake runs it after creating
# the environment for --use-conda): llama-cpp-python built for this CPU, then the package.
set -euo pipefail
cd "$(dirname "$0")"
PYTHONPATH=src python -m specproof.llama_build install
python -m pip install -q --no-deps -e .
python -m specproof.llama_build smoke
