"""The on-disk kernel cache, exercised across fresh processes: a second run compiles nothing, corrupted or untrusted
entries are discarded and rebuilt with correct results, the folder layout and permissions, and switching the cache
folder at run time (mj.flags.cache_dir)."""
import json
import os
import pathlib
import stat
import subprocess
import sys

import numpy as np

import metajit as mj
from conftest import ROOT, assert_close

# A small program with a few distinct kernels; prints its stats and results as JSON.
PROGRAM = """
import json, sys
import numpy as np
import metajit as mj
rng = np.random.default_rng(7)
a = mj.array(rng.standard_normal((50, 40)).astype(np.float32))
b = mj.array(rng.standard_normal((50, 40)).astype(np.float32))
fused = ((a * b + 1.0).exp() - a).relu()
row_sums = (a * b).sum(1)
softmax = (a - a.max(-1, keepdim=True)).exp()
softmax = softmax / softmax.sum(-1, keepdim=True)
mj.sync(fused, row_sums, softmax)
print(json.dumps({"stats": mj.stats(), "fused": fused.numpy().tolist(), "row_sums": row_sums.numpy().tolist(),
                  "softmax": softmax.numpy().tolist()}))
"""


def expected_results():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((50, 40)).astype(np.float32).astype(np.float64)
    b = rng.standard_normal((50, 40)).astype(np.float32).astype(np.float64)
    shifted = np.exp(a - a.max(-1, keepdims=True))
    return {"fused": np.maximum(np.exp(a * b + 1) - a, 0), "row_sums": (a * b).sum(1),
            "softmax": shifted / shifted.sum(-1, keepdims=True)}


def run_program(cache_dir):
    environment = dict(os.environ, METAJIT_CACHE_DIR=str(cache_dir),
                       PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    completed = subprocess.run([sys.executable, "-c", PROGRAM], env=environment, capture_output=True, text=True,
                               timeout=120)
    assert completed.returncode == 0, completed.stderr
    output = json.loads(completed.stdout)
    for name, expected in expected_results().items():
        np.testing.assert_allclose(np.array(output[name]), expected, rtol=1e-5, atol=1e-6, err_msg=name)
    return output["stats"], completed.stderr


def entry_files(cache_dir):
    return sorted(pathlib.Path(cache_dir).glob("??/*.mjk"))


def test_second_fresh_process_compiles_nothing(tmp_path):
    first, _ = run_program(tmp_path)
    assert first["kernels_compiled"] >= 3
    assert first["kernels_loaded_from_disk"] == 0
    second, _ = run_program(tmp_path)
    assert second["kernels_compiled"] == 0
    assert second["kernels_loaded_from_disk"] == first["kernels_compiled"]
    assert second["cache_entries_discarded"] == 0


def test_cache_layout_and_permissions(tmp_path):
    cache_dir = tmp_path / "nested" / "cache"
    first, _ = run_program(cache_dir)
    entries = entry_files(cache_dir)
    assert len(entries) == first["kernels_compiled"]
    for entry in entries:
        assert entry.parent.name == entry.name[:2]  # <dir>/<key[0:2]>/<key>.mjk
        assert stat.S_IMODE(entry.stat().st_mode) & 0o022 == 0
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700


def test_flipped_byte_in_cache_entry_is_discarded_and_rebuilt(tmp_path):
    first, _ = run_program(tmp_path)
    entries = entry_files(tmp_path)
    assert entries
    for entry in entries:
        data = bytearray(entry.read_bytes())
        data[len(data) // 2] ^= 0x5A
        entry.write_bytes(bytes(data))
    second, _ = run_program(tmp_path)  # numerics are checked inside
    assert second["cache_entries_discarded"] == len(entries)
    assert second["kernels_compiled"] == first["kernels_compiled"]
    third, _ = run_program(tmp_path)
    assert third["kernels_compiled"] == 0 and third["cache_entries_discarded"] == 0


def test_truncated_and_emptied_cache_entries_are_rebuilt(tmp_path):
    first, _ = run_program(tmp_path)
    entries = entry_files(tmp_path)
    for index, entry in enumerate(entries):
        data = entry.read_bytes()
        entry.write_bytes(b"" if index % 2 else data[: len(data) // 3])
    second, _ = run_program(tmp_path)
    assert second["cache_entries_discarded"] > 0 or second["kernels_compiled"] > 0
    assert second["kernels_compiled"] == first["kernels_compiled"]
    assert second["kernels_loaded_from_disk"] == 0


def test_garbage_file_with_valid_looking_name_is_rebuilt(tmp_path):
    run_program(tmp_path)
    entries = entry_files(tmp_path)
    for entry in entries:
        entry.write_bytes(b"MJK1" + b"\x01\x00\x00\x00" + os.urandom(200))
    second, _ = run_program(tmp_path)
    assert second["kernels_compiled"] == len(entries)
    assert second["cache_entries_discarded"] == len(entries)


def test_group_writable_entry_is_not_trusted(tmp_path):
    run_program(tmp_path)
    entry = entry_files(tmp_path)[0]
    entry.chmod(0o664)
    second, _ = run_program(tmp_path)
    assert second["kernels_compiled"] >= 1
    assert second["cache_entries_discarded"] >= 1


def test_switching_cache_dir_at_run_time(tmp_path, rng):
    previous = mj.flags.cache_dir
    data = rng.standard_normal(33).astype(np.float32)
    try:
        mj.flags.cache_dir = tmp_path
        assert mj.flags.cache_dir == str(tmp_path)
        mj._core.clear_memory_cache()
        mj.reset_stats()
        # a kernel source no other test builds: the constant is unique to this test
        assert_close(mj.array(data) * 1.2345678 + 0.25, data * np.float32(1.2345678) + np.float32(0.25))
        assert mj.stats()["kernels_compiled"] + mj.stats()["kernels_loaded_from_disk"] == 1
        assert len(entry_files(tmp_path)) >= 1
        mj._core.clear_memory_cache()
        mj.reset_stats()
        assert_close(mj.array(data) * 1.2345678 + 0.25, data * np.float32(1.2345678) + np.float32(0.25))
        assert mj.stats()["kernels_compiled"] == 0
        assert mj.stats()["kernels_loaded_from_disk"] == 1
    finally:
        mj.flags.cache_dir = previous


def test_four_processes_writing_the_same_keys_at_once_leave_intact_entries(tmp_path):
    """Four fresh processes compile the same kernels into one empty cache at the same moment: every process
    gets correct results, no entry is torn, and a fifth process loads them all without compiling."""
    cache_dir = tmp_path / "shared"
    environment = dict(os.environ, METAJIT_CACHE_DIR=str(cache_dir),
                       PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # Each waits for a start file so the compiles overlap instead of running one after another.
    start = tmp_path / "go"
    waiting = f"import os, time\nwhile not os.path.exists({str(start)!r}): time.sleep(0.005)\n"
    processes = [subprocess.Popen([sys.executable, "-c", waiting + PROGRAM], env=environment, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
    import time
    time.sleep(1.5)  # let all four import metajit
    start.write_text("")
    outputs = [process.communicate(timeout=180) for process in processes]
    for process, (stdout, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr
        for name, expected in expected_results().items():
            np.testing.assert_allclose(np.array(json.loads(stdout)[name]), expected, rtol=1e-5, atol=1e-6)
    assert not list(cache_dir.rglob("*.tmp*")), "temporary files left behind"
    stats, stderr = run_program(cache_dir)
    assert stats["kernels_compiled"] == 0 and stats["cache_entries_discarded"] == 0, stderr
    assert stats["kernels_loaded_from_disk"] == len(entry_files(cache_dir))
