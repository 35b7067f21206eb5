# metajit developer entry points.
#
#   make demo    install missing deps, build, run examples/demo.py
#   make test    install missing deps, build, run the C++ (ctest) and Python (pytest) suites
#   make bench   install missing deps, build, run bench/run_benchmarks.py, the operator benchmark (softmax, layer norm,
#                matmul, conv2d against PyTorch) and the small-CNN training benchmark
#   make bench-training   the training benchmark with ResNet-18 too
#   make setup   install missing deps and build
#   make build   (re)build only (configures first if the build dir is not configured yet)
#   make clean   remove the build dir and the in-tree extension

SHELL := /bin/bash

PYTHON    ?= python3
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS      ?= 2
CMAKE     ?= cmake
CTEST     ?= ctest
CMAKE_ARGS ?=

# One kernel cache for the whole test run, shared by ctest and pytest. Absolute, because ctest runs
# each test binary from its own directory under $(BUILD_DIR).
TEST_CACHE_DIR := $(abspath $(BUILD_DIR))/test-kernel-cache
PY_ENV := PYTHONPATH=$(CURDIR)/python$${PYTHONPATH:+:$$PYTHONPATH}

.PHONY: all setup deps configure build test demo bench bench-training fuzz clean

all: setup

deps:
	PYTHON=$(PYTHON) bash tools/install_dependencies.sh

# Configure once (build.ninja missing); later builds let CMake re-run itself when needed.
# The extension is built for the same interpreter that runs the tests.
configure:
	@if [ ! -f $(BUILD_DIR)/build.ninja ]; then \
	  set -x; \
	  $(CMAKE) -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	    -DPython3_EXECUTABLE="$$($(PYTHON) -c 'import sys; print(sys.executable)')" $(CMAKE_ARGS); \
	fi

build: configure
	$(CMAKE) --build $(BUILD_DIR) -j$(JOBS)

setup: deps
	$(MAKE) --no-print-directory build

# Both suites always run; the target fails if either fails.
test: setup
	@mkdir -p $(TEST_CACHE_DIR)
	@export METAJIT_CACHE_DIR=$(TEST_CACHE_DIR); \
	status=0; \
	echo "== C++ tests: $(CTEST) --test-dir $(BUILD_DIR) (METAJIT_CACHE_DIR=$$METAJIT_CACHE_DIR)"; \
	$(CTEST) --test-dir $(BUILD_DIR) --output-on-failure -j$(JOBS) || status=1; \
	echo "== Python tests: pytest tests/python"; \
	$(PY_ENV) $(PYTHON) -m pytest -q tests/python; rc=$$?; \
	if [ $$rc -eq 5 ] && [ -z "$$(find tests/python -name 'test_*.py' -o -name '*_test.py' | head -n 1)" ]; then \
	  echo "(no Python test files yet)"; rc=0; \
	fi; \
	[ $$rc -eq 0 ] || status=1; \
	if [ $$status -ne 0 ]; then echo "== FAILED"; else echo "== all tests passed"; fi; \
	exit $$status

demo: setup
	$(PY_ENV) $(PYTHON) examples/demo.py

bench: setup
	$(PY_ENV) $(PYTHON) bench/run_benchmarks.py
	$(PY_ENV) $(PYTHON) bench/operator_benchmark.py
	$(PY_ENV) $(PYTHON) bench/training_benchmark.py --models small_cnn

bench-training: setup
	$(PY_ENV) $(PYTHON) bench/training_benchmark.py --models small_cnn,resnet18 --steps 2

# Differential fuzzing against numpy for as long as asked (FUZZ_SECONDS); make test runs a bounded set.
FUZZ_SECONDS ?= 600
FUZZ_SEED ?= 100000
fuzz: setup
	$(PY_ENV) $(PYTHON) tools/fuzz.py --seconds $(FUZZ_SECONDS) --start-seed $(FUZZ_SEED) --all

clean:
	rm -rf $(BUILD_DIR)
	rm -f python/metajit/_core*.so
