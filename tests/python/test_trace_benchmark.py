"""Keeps bench/trace_benchmark.py honest: its LSTM row checks the traced model against PyTorch before timing (the
trace and a replay), its launch chain replays with one kernel per reduction, and it writes every table."""
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")
ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_benchmark_runs_and_writes_its_tables(tmp_path):
    output = tmp_path / "TRACE.md"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "trace_benchmark.py"), "--runs", "2", "--models", "lstm",
         "--quiet-wait", "0", "--output", str(output)], capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    text = output.read_text()
    for heading in ("## Inference", "## Host time per launch", "## Training step"):
        assert heading in text
    lstm = next(line for line in text.splitlines() if line.startswith("| LSTM"))
    assert int(lstm.split("|")[-2]) >= 64  # at least a library call per step
    chain = next(line for line in text.splitlines() if "(recording and signature every run)" in line)
    assert float(chain.split("|")[-2]) > 0
    launches = int(text.split("kernels launched per run")[0].rsplit("(", 1)[1])
    assert launches >= 200  # one per reduction, none fused
