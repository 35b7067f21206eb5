"""METAJIT_LOG=info reports each kernel's key and cache status with its compile time."""
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
