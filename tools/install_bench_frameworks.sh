#!/usr/bin/env bash
# A virtual environment for `make bench-frameworks`: the system interpreter's packages (PyTorch, pytest, ...)
# plus Jittor and tinygrad, so the benchmarks can run them beside metajit and PyTorch.
#
#   bash tools/install_bench_frameworks.sh VENV_DIR [PYTHON]
#
# Jittor 1.3 reads and writes numpy arrays through numpy 1's C layout (under numpy 2 its arrays hold garbage), so
# the environment pins numpy < 2; it is a separate environment so that pin never reaches the one `make test`
# uses. Idempotent: pip only runs for what the environment lacks.
set -euo pipefail

VENV="${1:?usage: install_bench_frameworks.sh VENV_DIR [PYTHON]}"
PYTHON="${2:-python3}"
log() { printf '[install_bench_frameworks] %s\n' "$*"; }

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV (with the system site-packages, for PyTorch)"
  "$PYTHON" -m venv --system-site-packages "$VENV"
fi
if ! "$VENV/bin/python" -c 'import jittor, tinygrad, numpy, sys; sys.exit(numpy.__version__ >= "2")' 2>/dev/null; then
  log "pip: installing jittor, tinygrad and numpy < 2 into $VENV"
  "$VENV/bin/python" -m pip install -q "numpy<2" jittor tinygrad
fi
# Jittor compiles its core on first import (a few minutes, once: it keeps it in ~/.cache/jittor). Doing it here
# keeps that out of the benchmarks. use_mkl=1 in the environment lets Jittor download its own oneDNN build here
# (it needs network access); bench/other_frameworks.py then uses it.
log "first Jittor import (compiles Jittor itself the first time) ..."
nvcc_path="${nvcc_path-}" use_mkl="${use_mkl-0}" log_silent=1 "$VENV/bin/python" -c 'import jittor' \
  || log "Jittor does not start here; the benchmarks will say why and leave it out"
