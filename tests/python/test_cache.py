"""The on-disk kernel cache, exercised across fresh processes: a second run compiles nothing, corrupted or untrusted
entries are discarded and rebuilt with correct results, the folder layout and permissions, switching the cache
folder at run time (mj.flags.cache_dir), and faults: a full disk, a read-only folder, entries owned by another
user, four writers at once."""
import json
import os
import pathlib
import resource
import shlex
import shutil
import signal
import stat
import subprocess
import sys

import pytest

import numpy as np

import metajit as mj
from conftest import PACKAGE_ROOT, assert_close, cpu_backend, flag_set

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
softmax = (a - a.amax(-1, keepdim=True)).exp()
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


def run_program(cache_dir, wrapper=(), preexec_fn=None, program=PROGRAM):
    """Runs PROGRAM in a fresh process (under `wrapper`, a command prefix, if given), checks its numbers and
    returns (stats, stderr)."""
    environment = dict(os.environ, METAJIT_CACHE_DIR=str(cache_dir),
                       PYTHONPATH=str(PACKAGE_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    completed = subprocess.run([*wrapper, sys.executable, "-c", program], env=environment, capture_output=True,
                               text=True, timeout=120, preexec_fn=preexec_fn)
    assert completed.returncode == 0, completed.stderr
    output = json.loads(completed.stdout.strip().splitlines()[0])
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


# Inputs beyond +-86 send a vector to the full-range exp, which hosts without AVX-512 take from the runtime
# support object (jit/codegen/cpp/runtime_support.h) rather than compiling it into each kernel.
SUPPORT_INPUTS = [0.5, -1.0, 86.5, 88.7, 100.0, -87.0, -90.0, -103.0, -104.5, -150.0, float("nan"), float("inf"),
                  float("-inf"), -0.0] + [0.37 * step for step in range(-30, 30)]
SUPPORT_PROGRAM = f"""
import json
import numpy as np
import metajit as mj
where_before = mj._core.locate_kernel(mj._core.runtime_support_key())
nan, inf = float("nan"), float("inf")
x = mj.array(np.array({SUPPORT_INPUTS!r}, dtype=np.float32))
values = (x.exp() * 1.0).numpy()
print(json.dumps({{"where_before": where_before, "values": [float(v) for v in values], "stats": mj.stats()}}))
"""


@cpu_backend
def test_the_full_range_vector_exp_comes_from_the_runtime_support_object_cached_like_a_kernel(tmp_path):
    uses_support = "+avx512f" not in mj._core.host_cpu_features()
    expected = np.exp(np.array(SUPPORT_INPUTS, dtype=np.float32).astype(np.float64))
    runs = []
    for _ in range(2):
        environment = dict(os.environ, METAJIT_CACHE_DIR=str(tmp_path), PYTHONPATH=str(PACKAGE_ROOT))
        completed = subprocess.run([sys.executable, "-c", SUPPORT_PROGRAM], env=environment, capture_output=True,
                                   text=True, timeout=120)
        assert completed.returncode == 0, completed.stderr
        output = json.loads(completed.stdout)
        # within 2 float32 ulps; subnormal results within one subnormal step; NaN stays NaN, overflow is inf
        with np.errstate(over="ignore"):
            rounded = expected.astype(np.float32)
        np.testing.assert_allclose(np.array(output["values"]), rounded, rtol=2.4e-7, atol=1.5e-45)
        runs.append(output)
    first, second = runs
    assert first["where_before"] == ""
    assert first["stats"]["kernels_compiled"] == (2 if uses_support else 1)  # the kernel, and the support once
    assert second["where_before"] == ("disk" if uses_support else "")
    assert second["stats"]["kernels_compiled"] == 0
    assert second["stats"]["kernels_loaded_from_disk"] == first["stats"]["kernels_compiled"]


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


def test_a_folder_switched_to_holds_the_runtime_support_its_kernels_call(tmp_path, rng):
    """The support object is linked once per process, maybe from another folder; a folder that gets an exp
    kernel must still get the support, so a fresh process with only that folder needs no compiler."""
    previous = mj.flags.cache_dir
    data = rng.standard_normal(33).astype(np.float32)
    try:
        mj.flags.cache_dir = tmp_path / "first"
        assert_close((mj.array(data) * 0.5).exp(), np.exp(data * np.float32(0.5)))  # links the support
        mj.flags.cache_dir = tmp_path / "second"
        mj._core.clear_memory_cache()
        assert_close((mj.array(data) * 0.625).exp(), np.exp(data * np.float32(0.625)))
    finally:
        mj.flags.cache_dir = previous
    calls_support = "+avx512f" not in mj._core.host_cpu_features()
    stored = {entry.stem for entry in entry_files(tmp_path / "second")}
    assert (mj._core.runtime_support_key() in stored) == calls_support
    program = ("import numpy as np, metajit as mj\n"
               f"data = np.array({data.tolist()!r}, dtype=np.float32)\n"
               "print(float((mj.array(data) * 0.625).exp().numpy().sum()), int(mj.stats()['kernels_compiled']))\n")
    environment = dict(os.environ, METAJIT_CACHE_DIR=str(tmp_path / "second"), METAJIT_COMPILE="never",
                       PYTHONPATH=str(PACKAGE_ROOT))
    environment.pop("METAJIT_BUNDLE", None)
    completed = subprocess.run([sys.executable, "-c", program], env=environment, capture_output=True, text=True,
                               timeout=120)
    assert completed.returncode == 0, completed.stderr
    total, compiled = completed.stdout.split()
    assert compiled == "0"
    np.testing.assert_allclose(float(total), np.exp(data * np.float32(0.625)).astype(np.float64).sum(), rtol=1e-5)


def test_four_processes_writing_the_same_keys_at_once_leave_intact_entries(tmp_path):
    """Four fresh processes compile the same kernels into one empty cache at the same moment: every process
    gets correct results, no entry is torn, and a fifth process loads them all without compiling."""
    cache_dir = tmp_path / "shared"
    environment = dict(os.environ, METAJIT_CACHE_DIR=str(cache_dir),
                       PYTHONPATH=str(PACKAGE_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
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


def _can_mount_privately():
    """Whether `unshare -rm` may mount a tmpfs (a private mount namespace, no real privileges needed)."""
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


# The program, then `cache verify` on what it left: run inside the private mount, which vanishes with it.
VERIFY = ("import subprocess, sys\n"
          "subprocess.run([sys.executable, '-m', 'metajit.cache', 'verify'], check=True, stdout=sys.stderr)\n")
LIST_LEFTOVERS = ("import os, sys\n"
                  "names = [n for _, _, files in os.walk(os.environ['METAJIT_CACHE_DIR']) for n in files]\n"
                  "print('leftover temporary files:', [n for n in names if n.startswith('.')], file=sys.stderr)\n")


def test_full_disk_degrades_to_memory_only(tmp_path):
    """A real ENOSPC: the cache lives on a 24 KiB tmpfs that holds about two entries. The run still gives correct
    numbers and warns once that the cache is memory-only; whatever reached the disk is intact and no temporary
    file is left. Without mount namespaces the same write failure comes from a file-size limit (EFBIG)."""
    cache_dir = tmp_path / "small"
    cache_dir.mkdir(mode=0o700)
    if _can_mount_privately():
        mount = f"mount -t tmpfs -o size=24k,mode=0700 tmpfs {shlex.quote(str(cache_dir))} && exec \"$@\""
        wrapper = ["unshare", "-rm", "sh", "-c", mount, "sh"]
        stats, stderr = run_program(cache_dir, wrapper=wrapper, program=PROGRAM + VERIFY + LIST_LEFTOVERS)
        assert "No space left on device" in stderr, stderr
        assert " entries intact, 0 discarded" in stderr, stderr
    else:
        def limit_file_size():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (6 * 1024, 6 * 1024))  # entries are about 3, 12 and 16 KB
        stats, stderr = run_program(cache_dir, preexec_fn=limit_file_size, program=PROGRAM + LIST_LEFTOVERS)
        assert "File too large" in stderr, stderr
        assert not list(cache_dir.rglob(".*")), "temporary files left behind"
    assert stderr.count("compiled kernels will only be cached in memory") == 1, stderr
    assert "leftover temporary files: []" in stderr, stderr
    assert stats["kernels_compiled"] >= 3


def test_full_disk_write_failure_leaves_no_torn_entry(tmp_path):
    """A write cut short by the file-size limit (EFBIG after a partial write): no partial entry or temporary
    file remains, the numbers are right, and a later unconstrained process finds nothing to discard."""
    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))  # smaller than any entry (2.5 KB and up)
    stats, stderr = run_program(tmp_path, preexec_fn=limit_file_size)
    assert "File too large" in stderr and "only be cached in memory" in stderr, stderr
    assert not [path for path in tmp_path.rglob("*") if path.is_file()], "partial entries or temporary files left"
    second, _ = run_program(tmp_path)
    assert second["cache_entries_discarded"] == 0
    assert second["kernels_compiled"] == stats["kernels_compiled"]


def test_read_only_cache_dir_degrades_to_memory_only(tmp_path):
    cache_dir = tmp_path / "read-only"
    cache_dir.mkdir(mode=0o700)
    if os.geteuid() != 0:
        cache_dir.chmod(0o500)
        stats, stderr = run_program(cache_dir)
        reason = "Permission denied"
    else:  # root ignores permission bits: make it a read-only bind mount in a private mount namespace
        if not _can_mount_privately():
            pytest.skip("running as root without mount namespaces: no way to make a folder read-only")
        quoted = shlex.quote(str(cache_dir))
        mount = f"mount --bind {quoted} {quoted} && mount -o remount,bind,ro {quoted} && exec \"$@\""
        stats, stderr = run_program(cache_dir, wrapper=["unshare", "-rm", "sh", "-c", mount, "sh"])
        reason = "Read-only file system"
    assert "is not writable" in stderr and reason in stderr, stderr
    assert stderr.count("compiled kernels will only be cached in memory") == 1, stderr
    assert stats["kernels_compiled"] >= 3
    assert not list(cache_dir.iterdir())


def test_entries_owned_by_another_user_are_not_loaded(tmp_path):
    """An entry some other user could have written is never loaded: owned by someone else (needs root to
    arrange), or writable by group or others. Each is recompiled, and the numbers are right."""
    first, _ = run_program(tmp_path)
    entries = entry_files(tmp_path)
    foreign, shared = entries[: len(entries) // 2], entries[len(entries) // 2:]
    for entry in shared:
        entry.chmod(0o606)
    if os.geteuid() == 0:
        for entry in foreign:
            os.chown(entry, 65534, 65534)
    else:
        foreign = []
    second, stderr = run_program(tmp_path)
    assert second["cache_entries_discarded"] == len(foreign) + len(shared), stderr
    assert second["kernels_compiled"] == len(foreign) + len(shared)
    assert "not loading cache entry" in stderr
    third, _ = run_program(tmp_path)  # the recompiled entries replaced the untrusted ones
    assert third["kernels_compiled"] == 0 and third["cache_entries_discarded"] == 0
    assert first["kernels_compiled"] == third["kernels_loaded_from_disk"]


def test_a_plan_launching_one_kernel_twice_compiles_it_once(tmp_path, rng):
    """Identical layers give a plan several kernels with one key; parallel compilation must not build it twice."""
    previous = mj.flags.cache_dir
    first, second, third = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(3))
    try:
        mj.flags.cache_dir = tmp_path
        mj._core.clear_memory_cache()
        mj.reset_stats()
        # The two exp kernels share a source (the constant is unique to this test); the sum is a third kernel, so
        # the sync asks for several missing kernels at once, which is when they are compiled in parallel.
        left = (mj.array(first) * 1.7654321).exp()
        right = (mj.array(second) * 1.7654321).exp()
        total = (mj.array(third).sum(0, keepdim=True) * 3.0)
        with flag_set("multiple_outputs", False):  # else the two exp kernels become one with two outputs
            mj.sync(left, right, total)
        assert_close(left, np.exp(first * np.float32(1.7654321)), rtol=1e-6)
        assert_close(right, np.exp(second * np.float32(1.7654321)), rtol=1e-6)
        stats = mj.stats()
        assert stats["kernels_launched"] == 3
        assert stats["kernels_compiled"] + stats["kernels_loaded_from_disk"] == 2
    finally:
        mj.flags.cache_dir = previous


# Many distinct kernels: one per length, since a kernel's extents are part of its source.
MANY_KERNELS = """
import json, sys
import numpy as np
import metajit as mj
values = []
for k in range({count}):
    x = mj.array(np.arange(k + 8, dtype=np.float32))
    values.append(float((x * 3.0 + (k + 2)).numpy()[3]))
print(json.dumps({{"values": values, "stats": mj.stats()}}))
"""


def run_many_kernels(cache_dir, count, limit, extra_environment=None, wait_for=None):
    environment = dict(os.environ, METAJIT_CACHE_DIR=str(cache_dir), METAJIT_CACHE_MAX_SIZE=str(limit),
                       PYTHONPATH=str(PACKAGE_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                       **(extra_environment or {}))
    program = MANY_KERNELS.format(count=count)
    if wait_for is not None:
        program = f"import os, time\nwhile not os.path.exists({str(wait_for)!r}): time.sleep(0.005)\n" + program
    return subprocess.Popen([sys.executable, "-c", program], env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def check_many_kernels(process, count):
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    output = json.loads(stdout)
    assert output["values"] == [9.0 + (k + 2) for k in range(count)]
    return output["stats"]


def test_the_disk_cache_keeps_to_its_size_limit_removing_least_recently_used_entries(tmp_path):
    """METAJIT_CACHE_MAX_SIZE bounds the folder: once a store takes it past the limit, the least recently used
    entries go until it is at most 90% of the limit."""
    cache_dir = tmp_path / "bounded"
    check_many_kernels(run_many_kernels(cache_dir, 4, "unlimited"), 4)
    entry_size = max(path.stat().st_size for path in entry_files(cache_dir))
    limit = 6 * entry_size
    stats = check_many_kernels(run_many_kernels(cache_dir, 24, limit), 24)
    assert stats["kernels_compiled"] >= 20
    sizes = [path.stat().st_size for path in entry_files(cache_dir)]
    assert sum(sizes) <= limit, (sum(sizes), limit)
    assert 2 <= len(sizes) < 24


def test_a_load_makes_an_entry_recent_and_prune_removes_the_oldest_first(tmp_path):
    cache_dir = tmp_path / "recency"
    check_many_kernels(run_many_kernels(cache_dir, 3, "unlimited"), 3)
    files = entry_files(cache_dir)
    assert len(files) >= 3
    for age, path in enumerate(files):  # the first file the oldest
        os.utime(path, (1_000_000 + age, 1_000_000 + age))
    keys = [path.stem for path in files]
    environment = dict(os.environ, METAJIT_CACHE_DIR=str(cache_dir),
                       PYTHONPATH=str(PACKAGE_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # Loading the oldest entry makes it the most recent: prune then keeps it and removes the next oldest.
    touch = f"from metajit import _core\nassert _core.disk_load({keys[0]!r}) is not None\n"
    assert subprocess.run([sys.executable, "-c", touch], env=environment, timeout=60).returncode == 0
    assert files[0].stat().st_mtime > 2_000_000
    total = sum(path.stat().st_size for path in files)
    keep = total - files[1].stat().st_size
    completed = subprocess.run([sys.executable, "-m", "metajit.cache", "prune", "--max-size", str(keep)],
                               env=environment, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert "removed 1 least recently used kernels" in completed.stdout
    assert files[0].exists() and not files[1].exists() and files[2].exists()
    info = subprocess.run([sys.executable, "-m", "metajit.cache", "info"], env=environment, capture_output=True,
                          text=True, timeout=60)
    assert "size limit:     2.0 GiB" in info.stdout


def test_processes_sharing_a_small_cache_all_get_their_results(tmp_path):
    """Three processes compile into one folder whose limit holds a few entries, so each removes entries the
    others wrote (and may be reading): every one finishes with the right numbers."""
    cache_dir = tmp_path / "contended"
    check_many_kernels(run_many_kernels(cache_dir, 1, "unlimited"), 1)
    limit = 4 * max(path.stat().st_size for path in entry_files(cache_dir))
    start = tmp_path / "go"
    processes = [run_many_kernels(cache_dir, 16, limit, wait_for=start) for _ in range(3)]
    import time
    time.sleep(1.5)
    start.write_text("")
    for process in processes:
        check_many_kernels(process, 16)
    assert sum(path.stat().st_size for path in entry_files(cache_dir)) <= limit
    assert not list(cache_dir.rglob("*.tmp*")), "temporary files left behind"


def test_a_malformed_cache_size_limit_is_an_error_naming_it(tmp_path):
    process = run_many_kernels(tmp_path / "any", 1, "12 parsecs")
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode != 0
    assert "METAJIT_CACHE_MAX_SIZE='12 parsecs' is not a size" in stderr
