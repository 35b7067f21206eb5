"""METAJIT_LOG: info reports each kernel's key and cache status with its compile time; plan, ir and source print the
plan, the kernel IR after each pass and the rendered kernels, each level also printing what the levels below print."""
import os
import re
import subprocess
import sys

from conftest import cpu_backend

PROGRAM = """
import numpy as np, metajit as mj
x = mj.array(np.arange(10, dtype=np.float32))
print((x.exp() * 3 + 1).sum().item())
"""


def run(cache_dir, level):
    environment = dict(os.environ, METAJIT_CACHE_DIR=str(cache_dir), METAJIT_LOG=level,
                       PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", PROGRAM], env=environment, capture_output=True, text=True, check=True)


@cpu_backend
def test_info_logs_compile_then_disk_load(tmp_path):
    first = run(tmp_path, "info")
    compiled = re.findall(r"kernel ([0-9a-f]{32}): compiled in ([0-9.]+) ms", first.stderr)
    assert compiled, first.stderr
    second = run(tmp_path, "info")
    loaded = re.findall(r"kernel ([0-9a-f]{32}): loaded from disk cache", second.stderr)
    assert sorted(loaded) == sorted(key for key, _ in compiled)
    assert first.stdout == second.stdout


def test_warning_level_is_quiet(tmp_path):
    assert "kernel" not in run(tmp_path, "warning").stderr


# A transpose (the transposed-tiles pass decides its form) beside a row sum: each level's output names both.
LADDER_PROGRAM = """
import numpy as np, metajit as mj
x = mj.array(np.arange(64 * 32, dtype=np.float32).reshape(64, 32))
print(float((x.exp() + 1).sum(1).numpy()[0]), x.transpose(0, 1).numpy().shape)
"""


def run_ladder(cache_dir, level):
    environment = dict(os.environ, METAJIT_CACHE_DIR=str(cache_dir), METAJIT_LOG=level,
                       PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", LADDER_PROGRAM], env=environment, capture_output=True, text=True,
                          check=True).stderr


@cpu_backend
def test_plan_level_prints_each_plan_and_info_but_no_ir_or_source(tmp_path):
    stderr = run_ladder(tmp_path, "plan")
    plans = re.findall(r"\[metajit plan\] plan: (\d+) kernels", stderr)
    assert plans == ["1", "1"], stderr
    assert re.search(r"kernel 0: generated [0-9a-f]{32}, 64 work items, grain \d+\n    writes #\d+ reduce_add float32 "
                     r"\[64\]", stderr), stderr
    assert "fused exp" in stderr
    assert "compiled in" in stderr  # info's messages are part of every level above it
    assert "[metajit ir]" not in stderr and "[metajit source]" not in stderr


@cpu_backend
def test_ir_level_prints_the_ir_after_lowering_and_each_pass(tmp_path):
    stderr = run_ladder(tmp_path, "ir")
    assert "[metajit plan]" in stderr
    passes = re.findall(r"\[metajit ir\] IR after ([a-z -]+)", stderr)
    order = ["lowering", "reduce-loop merging", "launch offsets", "running sums", "column sums", "transposed tiles",
             "parallel grain", "loop pieces"]
    assert passes == order + order, stderr
    assert "  reduce sum_0: float32 = add over r1 < 32\n" in stderr
    assert "schedule transposed tiles across dim 0, tile 16; 8 work items, grain 128" in stderr
    assert "IR after column sums: unchanged" in stderr
    assert "[metajit source]" not in stderr


@cpu_backend
def test_source_level_prints_each_rendered_kernel_without_the_prelude(tmp_path):
    stderr = run_ladder(tmp_path, "source")
    sources = re.findall(r"\[metajit source\] kernel ([0-9a-f]{32}) rendered \(prelude omitted\):\n// metajit kernel",
                         stderr)
    assert len(sources) == 2, stderr
    assert stderr.count('extern "C" void metajit_kernel') == 2
    assert "metajit prelude" not in stderr
    assert "[metajit ir]" in stderr and "[metajit plan]" in stderr
    assert "mj_transpose_tile(" in stderr  # the transposed form, as the IR said


def test_levels_below_plan_print_no_plan_ir_or_source(tmp_path):
    for level in ("warning", "info"):
        stderr = run_ladder(tmp_path, level)
        assert "[metajit plan]" not in stderr and "[metajit ir]" not in stderr and "[metajit source]" not in stderr


def test_flags_log_accepts_every_level():
    import metajit as mj
    before = mj.flags.log
    try:
        for level in ("warning", "info", "plan", "ir", "source", "debug"):
            mj.flags.log = level
            assert mj.flags.log == level
        try:
            mj.flags.log = "loud"
        except ValueError as error:
            assert "'source'" in str(error)
        else:
            raise AssertionError("mj.flags.log accepted 'loud'")
    finally:
        mj.flags.log = before
