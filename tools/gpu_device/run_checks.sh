#!/usr/bin/env bash
# The GPU checks of one lent-machine session, as one command (device time is scarce: everything in one call).
# Run here first: bash tools/gpu_device/pack_runtime.sh --static-only; then with the `run` tool, carrying
# .device: bash tools/gpu_device/run_checks.sh [budget seconds for the test suite]. Logs go to $OUT.
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
OUT=${OUT:-/tmp/metajit-gpu-checks}
mkdir -p "$OUT"
suite_seconds=${1:-240}  # test_fuzz.py's shard needs more than 150 s on an H200
PYTHON=python3
$PYTHON -c "import torch" 2>/dev/null || PYTHON=/opt/torch/.venv/bin/python
export PYTHON
{ nvidia-smi; $PYTHON -V; g++ --version | head -1; } > "$OUT/machine.txt" 2>&1
start=$(date +%s)
if ! bash tools/gpu_device/build_extension.sh > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"; exit 1
fi
echo "extension built in $(( $(date +%s) - start )) s"
export PYTHONPATH=$root/python LD_LIBRARY_PATH=/opt/metajit-runtime/lib METAJIT_CACHE_DIR=/tmp/metajit-gpu-cache
export PYTHONFAULTHANDLER=1
$PYTHON -c "import metajit as mj; print(mj.cuda.status())" > "$OUT/status.txt" 2>&1
head -c 600 "$OUT/status.txt"; echo
# Anything session-specific to try first (a crash to bisect, say) goes in .device/first.py.
if [ -f .device/first.py ]; then timeout 240 $PYTHON .device/first.py > "$OUT/first.txt" 2>&1; fi
# The GPU tests first (their failures are the point), then the benchmark, then the whole suite in shards.
timeout 150 $PYTHON -m pytest -q --tb=short -p no:cacheprovider tests/python/test_cuda_libraries.py tests/python/test_cuda_execution.py \
  tests/python/test_cuda.py > "$OUT/gpu_tests.txt" 2>&1
tail -4 "$OUT/gpu_tests.txt"
if [ -z "${SKIP_BENCH:-}" ]; then  # SKIP_BENCH=1 when device time is short
  timeout 150 $PYTHON bench/cuda_benchmark.py --profile --output "$OUT/CUDA.md" > "$OUT/bench.txt" 2>&1
  tail -40 "$OUT/bench.txt"
fi
files=(tests/python/test_*.py)
shards=16
for shard in $(seq 0 $((shards - 1))); do
  selected=()
  for index in "${!files[@]}"; do
    if [ $((index % shards)) -eq "$shard" ]; then selected+=("${files[$index]}"); fi
  done
  METAJIT_DEVICE=cuda timeout "$suite_seconds" $PYTHON -m pytest -q --tb=line -rfE -p no:cacheprovider \
    "${selected[@]}" > "$OUT/suite_$shard.txt" 2>&1 &
done
wait
for shard in $(seq 0 $((shards - 1))); do tail -1 "$OUT/suite_$shard.txt"; done
# One file back (the tool returns a few files only).
for shard in $(seq 0 $((shards - 1))); do echo "=== shard $shard"; cat "$OUT/suite_$shard.txt"; done > "$OUT/suite.txt"
rm -f "$OUT"/suite_*.txt
grep -h "^FAILED\|^ERROR" "$OUT/suite.txt" | cut -c1-150 | head -60
echo "total $(( $(date +%s) - start )) s"
