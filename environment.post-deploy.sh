#!/usr/bin/env bash
# Run inside the environment created from environment.yml (Snakemake runs it after creating
# the environment for --use-conda): llama-cpp-python built for this CPU, then the package.
#
#   environment.post-deploy.sh [--dry-run] [PROJECT_ROOT]
#
# Snakemake runs a copy of this file (.snakemake/conda/<hash>.post-deploy.sh) from the
# directory it runs in, so the project is the working directory (or the nearest directory
# above it holding pyproject.toml and src/specproof), or PROJECT_ROOT when given; never
# this file's own location. --dry-run prints the project root and the commands, runs none.
# LLAMA_CMAKE_ARGS, as for `make install`, replaces the CMake flags chosen for this CPU.
set -euo pipefail

usage="usage: environment.post-deploy.sh [--dry-run] [PROJECT_ROOT]"
dry_run=0
root=""
for arg in "$@"; do
    case "$arg" in
        --dry-run) dry_run=1 ;;
        -*) echo "post-deploy: error: unknown option $arg ($usage)" >&2; exit 2 ;;
        *)
            if [ -n "$root" ]; then echo "post-deploy: error: one PROJECT_ROOT at most ($usage)" >&2; exit 2; fi
            root="$arg" ;;
    esac
done

is_project() { [ -f "$1/pyproject.toml" ] && [ -f "$1/src/specproof/__init__.py" ]; }

if [ -n "$root" ]; then
    if ! is_project "$root"; then
        echo "post-deploy: error: $root: not the specproof project (no pyproject.toml and src/specproof)" >&2
        exit 2
    fi
else
    root="$PWD"
    while ! is_project "$root"; do
        if [ "$root" = / ]; then
            echo "post-deploy: error: $PWD is not inside the specproof project: run it from the" \
                 "project root (as Snakemake does) or give the root as an argument ($usage)" >&2
            exit 2
        fi
        root="$(dirname "$root")"
    done
fi
root="$(cd "$root" && pwd -P)"

run() {
    if [ "$dry_run" = 1 ]; then
        printf '%q ' "$@"
        echo
    else
        "$@"
    fi
}

echo "post-deploy: project root $root"
cd "$root"
run env PYTHONPATH=src python -m specproof.llama_build install --cmake-args="${LLAMA_CMAKE_ARGS:-}"
run python -m pip install -q --no-deps -e .
run python -m specproof.llama_build smoke
