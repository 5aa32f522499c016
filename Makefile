# specproof — one entry point for install, tests, study and paper.
# `make test` and `make paper` work on a fresh clone: they create .venv and install everything.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Portable llama.cpp build: a native build segfaults on Xeons that advertise AMX
# (ggml_backend_amx_mul_mat). Recorded in provenance via $(VENV)/llama_cpp_build.json.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON
LLAMA_VERSION    := 0.3.36
TORCH_VERSION    ?= 2.13.0
CORES            ?= 1
STUDY            ?= cpu-smollm2
# Rules call the `specproof` command: put the venv first on PATH for every recipe.
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: install test test-fast study paper audit bench lint clean-venv

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# Pin torch first: an unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)"
	LLAMA_CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" LLAMA_VERSION="$(LLAMA_VERSION)" \
		$(BIN)/python .ci/install_llama_cpp.py
	$(BIN)/python -m pip install -q -e ".[pipeline,dev]"
	touch $@

test: install
	$(BIN)/python -m pytest -q -ra

test-fast: install
	$(BIN)/python -m pytest -q -ra -m "not models"

study: install
	$(BIN)/snakemake --cores $(CORES) study --config study=$(STUDY)

paper: install
	$(BIN)/snakemake --cores $(CORES) all

audit: install
	$(BIN)/snakemake --cores $(CORES) audit

# The four benchmark tables the paper cites (~20 min here); then `make paper`.
BENCHMARKS := target_only ngram model_draft policies
bench: install
	for b in $(BENCHMARKS); do $(BIN)/python benchmarks/$$b.py || exit 1; done

lint: install
	$(BIN)/snakemake --lint

clean-venv:
	rm -rf $(VENV)
