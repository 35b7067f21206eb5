# metajit developer entry points.
#
#   make demo    install missing deps, build, run examples/demo.py
#   make test    install missing deps, build, lint the Python code (ruff), run the C++ (ctest) and Python (pytest)
#                suites
#   make lint    ruff on the Python code (rules in pyproject.toml)
#   make format-check   clang-format on the C++ lines changed since FORMAT_BASE (default origin/main), as a diff
#   make bench   install missing deps, build, run bench/run_benchmarks.py, the operator benchmark (softmax, layer norm,
#                matmul, conv2d against PyTorch), the operator sweep (about 40 library ops against PyTorch, slowest
#                first), the convolution-variant benchmark (grouped, depthwise, 1x1), the training benchmarks and the
#                inference benchmark (ResNet-18 and the transformer, forward only, batch 1 and up)
#   make bench-training   the training benchmark with ResNet-18 too
#   make bench-planning   planning time per step and per node of an unrolled LSTMCell training step (bench/PLANNING.md)
#   make bench-models   five models written as PyTorch code (nanoGPT-style decoder, LSTM LM, style transfer,
#                MobileNetV2, U-Net) run by metajit, PyTorch eager and torch.compile: training and inference
#   make bench-memory   peak memory and step time of ResNet-18 and the transformer LM under mj.flags.memory_budget
#                (none, 1/2, 1/4) and with checkpoints per block, beside PyTorch eager (bench/MEMORY.md)
#   make bench-trace   mj.trace: replayed plans against recording every run and PyTorch eager (bench/TRACE.md)
#   make bench-deployment   exported models (mj.export) in the C++ runtime against metajit, PyTorch eager and ONNX
#                Runtime, the artifacts' sizes and what the runtime library links (bench/DEPLOYMENT.md)
#   make bench-cuda   the CUDA benchmark (chain, softmax, ResNet-18 step against PyTorch on the GPU)
#   make bench-distributed   metajit.distributed's all-reduce against raw MPI, and the data-parallel step
#   make bench-frameworks   make bench with Jittor and tinygrad beside metajit and PyTorch, from a virtual
#                environment (.bench-frameworks/) that tools/install_bench_frameworks.sh sets up
#   make test-asan   build the C++ code with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/) and run
#                the C++ tests (LeakSanitizer on) and a Python subset against it
#   make test-models-full   the model-zoo tests with the full-size VGG-11-BN too (about 6 GB, kept out of make test)
#   make fuzz    differential fuzzing against numpy, mutating programs against PyTorch, then deep and wide graphs
#                against numpy, for FUZZ_SECONDS each
#   make soak    the steady-state training test for SOAK_STEPS steps (make test runs 200)
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

.PHONY: all setup deps configure build test lint format-check test-asan test-models-full demo bench bench-run bench-frameworks bench-training bench-planning bench-models bench-memory bench-trace bench-deployment bench-cuda bench-distributed fuzz soak \
	clean

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

# The lint and both suites always run; the target fails if any fails.
test: setup
	@mkdir -p $(TEST_CACHE_DIR)
	@export METAJIT_CACHE_DIR=$(TEST_CACHE_DIR); \
	status=0; \
	echo "== Python lint: ruff check"; \
	$(PYTHON) -m ruff check . || status=1; \
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

lint:
	$(PYTHON) -m ruff check .

# Only the lines a change touches are checked: the tree predates .clang-format and is not reformatted wholesale.
# Prints the diff clang-format would make and fails when there is one (git-clang-format-14 itself exits 0).
FORMAT_BASE ?= $(shell git rev-parse -q --verify origin/main >/dev/null && echo origin/main || echo main)
format-check:
	@base=$$(git merge-base $(FORMAT_BASE) HEAD) || { echo "format-check: no common commit with '$(FORMAT_BASE)' (set FORMAT_BASE=<commit>)"; exit 2; }; \
	echo "== clang-format on the C++ lines changed since $(FORMAT_BASE) ($${base:0:12}), committed or not"; \
	output=$$(git-clang-format-14 --binary clang-format-14 --extensions cc,h --diff $$base) || exit 2; \
	echo "$$output"; \
	if grep -q '^diff --git' <<<"$$output"; then \
	  echo "== format-check failed: the diff above is clang-format's. To apply it, stage the files (git add), then:"; \
	  echo "   git clang-format-14 --binary clang-format-14 --extensions cc,h $$base"; exit 1; \
	fi

demo: setup
	$(PY_ENV) $(PYTHON) examples/demo.py

bench: setup
	$(MAKE) --no-print-directory bench-run

# The benchmarks themselves, with whichever interpreter PYTHON names (bench-frameworks gives its own).
bench-run:
	$(PY_ENV) $(PYTHON) bench/run_benchmarks.py
	$(PY_ENV) $(PYTHON) bench/operator_benchmark.py
	$(PY_ENV) $(PYTHON) bench/operator_sweep.py
	$(PY_ENV) $(PYTHON) bench/convolution_benchmark.py
	$(PY_ENV) $(PYTHON) bench/training_benchmark.py --models small_cnn,resnet18,transformer
	$(PY_ENV) $(PYTHON) bench/inference_benchmark.py

BENCH_FRAMEWORKS_VENV ?= .bench-frameworks
bench-frameworks: setup
	bash tools/install_bench_frameworks.sh $(BENCH_FRAMEWORKS_VENV) $(PYTHON)
	$(MAKE) --no-print-directory bench-run PYTHON=$(BENCH_FRAMEWORKS_VENV)/bin/python

bench-training: setup
	$(PY_ENV) $(PYTHON) bench/training_benchmark.py --models small_cnn,resnet18,transformer --steps 2

# What planning costs per step and per graph node on an unrolled recurrence, at 250 to 2000 steps.
bench-planning: setup
	$(PY_ENV) $(PYTHON) bench/planning_benchmark.py

# Model code as people write it, the same source run by metajit, PyTorch eager and torch.compile (bench/MODELS.md).
bench-models: setup
	$(PY_ENV) $(PYTHON) bench/models_benchmark.py

# Peak memory and step time under mj.flags.memory_budget and activation checkpointing, beside PyTorch (bench/MEMORY.md).
bench-memory: setup
	$(PY_ENV) $(PYTHON) bench/memory_benchmark.py

# mj.trace: a replayed plan against recording the graph every run, and PyTorch eager (bench/TRACE.md).
bench-trace: setup
	$(PY_ENV) $(PYTHON) bench/trace_benchmark.py

# An exported model run by the C++ runtime (examples/cpp_inference, built against build/'s runtime) and from Python,
# against metajit, PyTorch eager and ONNX Runtime (bench/DEPLOYMENT.md). ONNX Runtime and onnx (which
# torch.onnx.export writes with) are benchmark-only, so they are installed here rather than by install_dependencies;
# without them the benchmark still runs and says so. PIP_BREAK_SYSTEM_PACKAGES: Debian's Python refuses plain pip.
bench-deployment: setup
	@$(PYTHON) -c 'import onnxruntime, onnx' 2>/dev/null || PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore \
	  $(PYTHON) -m pip install -q onnxruntime onnx || echo "onnxruntime / onnx did not install: no ONNX Runtime rows"
	$(PY_ENV) $(PYTHON) bench/deployment_benchmark.py

# The CUDA backend against PyTorch on this machine's GPU (says so and measures nothing without one).
bench-cuda: setup
	$(PY_ENV) $(PYTHON) bench/cuda_benchmark.py --profile

# metajit.distributed against raw MPI (a C program built with mpicc) on 2 ranks, and the data-parallel step.
bench-distributed: setup
	$(PY_ENV) $(PYTHON) bench/distributed_benchmark.py

# Differential fuzzing for as long as asked (FUZZ_SECONDS each): meta-op graphs against numpy, mutating programs
# against PyTorch, then deep and wide graphs (chains of 10^4-10^5 ops, fan-outs, long backwards, recurrences)
# against numpy; make test runs a bounded set of each. Every run happens even if an earlier one fails.
FUZZ_SECONDS ?= 600
FUZZ_SEED ?= 100000
fuzz: setup
	@status=0; \
	$(PY_ENV) $(PYTHON) tools/fuzz.py --seconds $(FUZZ_SECONDS) --start-seed $(FUZZ_SEED) --all || status=1; \
	$(PY_ENV) $(PYTHON) tools/fuzz.py --mutation --seconds $(FUZZ_SECONDS) --start-seed $(FUZZ_SEED) || status=1; \
	$(PY_ENV) $(PYTHON) tools/fuzz.py --deep --seconds $(FUZZ_SECONDS) --start-seed $(FUZZ_SEED) || status=1; \
	exit $$status

# A long training loop: no kernel compiled after step 1, live Vars and allocator bytes identical every step, RSS
# flat (tests/python/test_training_steady_state.py with more steps).
SOAK_STEPS ?= 5000
soak: setup
	METAJIT_SOAK_STEPS=$(SOAK_STEPS) $(PY_ENV) $(PYTHON) -m pytest -q tests/python/test_training_steady_state.py

clean:
	rm -rf $(BUILD_DIR)
	rm -f python/metajit/_core*.so

# Sanitizers: a second build tree, with its own copy of the Python package (the extension goes there, not into
# python/metajit). Python itself is not instrumented, so the ASan runtime is preloaded into it; Python's own
# allocations at exit are not ours to judge, so leaks are checked in the C++ tests.
ASAN_BUILD_DIR ?= build-asan
ASAN_BUILD := $(abspath $(ASAN_BUILD_DIR))
ASAN_PYTHON_TESTS ?= tests/python/test_elementwise.py tests/python/test_fusion.py tests/python/test_autograd.py \
  tests/python/test_errors.py tests/python/test_code_op.py tests/python/test_function.py \
  tests/python/test_check_nan.py tests/python/test_cache.py tests/python/test_bundle.py \
  tests/python/test_inspect.py tests/python/test_lowering.py tests/python/test_ops_indexing.py \
  tests/python/test_ops_conv.py tests/python/test_interrupt.py tests/python/test_fuzz.py
# allocator_may_return_null: the out-of-memory tests ask for more than any machine has and expect MemoryError.
# Reports go to files (pytest would swallow a dying process's stderr), printed at the end; any error fails the run
# (the warning about the refused 2^50-byte allocation does not).
SANITIZER_REPORTS := $(ASAN_BUILD)/sanitizer-reports
SANITIZER_OPTIONS := ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1:allocator_may_return_null=1:log_path=$(SANITIZER_REPORTS)/asan \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(SANITIZER_REPORTS)/ubsan
test-models-full: setup
	METAJIT_TEST_FULL_SIZE_MODELS=1 $(PY_ENV) $(PYTHON) -m pytest -q tests/python/test_models_torchvision.py

test-asan: deps
	$(MAKE) --no-print-directory build BUILD_DIR=$(ASAN_BUILD_DIR) BUILD_TYPE=RelWithDebInfo \
	  CMAKE_ARGS="-DMETAJIT_SANITIZE=address,undefined -DMETAJIT_PYTHON_OUTPUT_DIR=$(ASAN_BUILD)/python/metajit"
	@rm -rf $(SANITIZER_REPORTS) && mkdir -p $(SANITIZER_REPORTS) $(ASAN_BUILD)/python $(ASAN_BUILD)/test-kernel-cache
	@tar -C python --exclude='_core*.so' --exclude=__pycache__ -cf - metajit | tar -C $(ASAN_BUILD)/python -xf -
	@export METAJIT_CACHE_DIR=$(ASAN_BUILD)/test-kernel-cache $(SANITIZER_OPTIONS); \
	status=0; \
	echo "== C++ tests under ASan + UBSan + LSan: $(CTEST) --test-dir $(ASAN_BUILD_DIR)"; \
	$(CTEST) --test-dir $(ASAN_BUILD_DIR) --output-on-failure -j$(JOBS) || status=1; \
	echo "== Python subset under ASan + UBSan (leak checking off: the interpreter is not ours)"; \
	ASAN_OPTIONS=$$ASAN_OPTIONS:detect_leaks=0 LD_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libstdc++.so)" \
	  METAJIT_TEST_PACKAGE_ROOT=$(ASAN_BUILD)/python PYTHONPATH=$(ASAN_BUILD)/python \
	  $(PYTHON) -m pytest -q -p no:cacheprovider $(ASAN_PYTHON_TESTS) || status=1; \
	for report in $(SANITIZER_REPORTS)/*; do \
	  [ -f "$$report" ] || continue; echo "== $$report"; cat "$$report"; \
	  if grep -qE "ERROR: |runtime error" "$$report"; then status=1; fi; \
	done; \
	if [ $$status -ne 0 ]; then echo "== FAILED"; else echo "== sanitizers clean"; fi; \
	exit $$status
