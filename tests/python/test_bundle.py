"""Deployment bundles and the cache CLI: record the kernels a run used, serve them in a fresh process with an
empty cache and compiling forbidden, refuse modified or foreign bundles, and look after the disk cache."""
import json
import os
import subprocess
import sys

import pytest

import metajit as mj
from metajit.cache import bundle as bundle_format

from conftest import PACKAGE_ROOT

# A small model: a generated fused chain, a reduction, a Code op and (with lowering) a oneDNN matmul.
MODEL = """
import numpy as np, metajit as mj
rng = np.random.default_rng(7)
x = mj.array(rng.normal(size=(32, 64)).astype(np.float32))
w = mj.array(rng.normal(size=(64, 48)).astype(np.float32))
hidden = (x @ w).relu() * 0.5 + 0.25
probabilities = hidden.softmax(1)
clipped = mj.code(probabilities.shape, "float32", [probabilities],
                  "for (int64_t i = 0; i < in0_numel; ++i) out0_p[i] = std::min(in0_p[i], 0.5f);")  # MODEL CODE OP
result = clipped.sum(0)
"""


def run_python(script, tmp_path, **environment):
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT))
    env.pop("METAJIT_BUNDLE", None)
    env.pop("METAJIT_COMPILE", None)
    env.update(environment)
    return subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A bundle and the outputs of the run that made it (in a separate process with its own cache)."""
    folder = tmp_path_factory.mktemp("bundle")
    script = MODEL + f"""
with mj.cache.record() as recording:
    values = result.numpy()
manifest = recording.save({str(folder / 'model.mjb')!r})
np.save({str(folder / 'expected.npy')!r}, values)
print(len(recording), manifest["cpu"])
"""
    completed = run_python(script, folder, METAJIT_CACHE_DIR=str(folder / "cache"))
    assert completed.returncode == 0, completed.stderr
    return folder


def test_fresh_process_with_bundle_and_compile_never_gives_identical_outputs(recorded, tmp_path):
    script = MODEL + f"""
values = result.numpy()
expected = np.load({str(recorded / 'expected.npy')!r})
stats = mj.stats()
print(int(np.array_equal(values, expected)), int(stats["kernels_compiled"]), int(stats["kernels_loaded_from_bundle"]))
"""
    completed = run_python(script, tmp_path, METAJIT_CACHE_DIR=str(tmp_path / "empty-cache"),
                           METAJIT_COMPILE="never", METAJIT_BUNDLE=str(recorded / "model.mjb"))
    assert completed.returncode == 0, completed.stderr
    identical, compiled, from_bundle = map(int, completed.stdout.split())
    assert identical == 1
    assert compiled == 0
    assert from_bundle >= 3  # the fused kernels and the Code op


def test_a_bundle_recorded_at_one_position_serves_every_other(tmp_path):
    """Slices compile as x[0] with their offset added at launch (jit/ir/launch_offsets.h): the kernels recorded for
    step 0 of a loop over x[t] serve step 37 in a deployment that may not compile."""
    model = """
import numpy as np, metajit as mj
x = mj.array(np.random.default_rng(5).normal(size=(40, 8, 33)).astype(np.float32))
def run(step):
    return ((x[step] * 2.0).tanh() + x[step + 1]).softmax(1).numpy()
"""
    record = model + f"""
with mj.cache.record() as recording:
    run(0)
recording.save({str(tmp_path / 'steps.mjb')!r})
np.save({str(tmp_path / 'expected.npy')!r}, run(37))
"""
    completed = run_python(record, tmp_path, METAJIT_CACHE_DIR=str(tmp_path / "cache"))
    assert completed.returncode == 0, completed.stderr
    serve = model + f"""
values = run(37)
print(int(np.array_equal(values, np.load({str(tmp_path / 'expected.npy')!r}))), int(mj.stats()["kernels_compiled"]))
"""
    completed = run_python(serve, tmp_path, METAJIT_CACHE_DIR=str(tmp_path / "empty-cache"), METAJIT_COMPILE="never",
                           METAJIT_BUNDLE=str(tmp_path / "steps.mjb"))
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["1", "0"], completed.stdout


def test_a_bundle_recorded_after_warm_up_still_carries_the_runtime_support(tmp_path):
    """The runtime support object (jit/codegen/cpp/runtime_support.h) is linked once, by the first kernel that calls
    into it; a recording that starts later must still carry it, or the deployed exp kernel could not be linked."""
    values = "x = mj.array(np.linspace(-100, 100, 77, dtype=np.float32))\nvalues = (x.exp() + 3.0).numpy()\n"
    record = f"""
import numpy as np, metajit as mj
(mj.array(np.ones(40, np.float32)).exp() * 2.0).numpy()  # warm-up, outside the recording
with mj.cache.record() as recording:
{"".join("    " + line + chr(10) for line in values.splitlines())}
recording.save({str(tmp_path / 'late.mjb')!r})
np.save({str(tmp_path / 'late.npy')!r}, values)
print(int(mj._core.runtime_support_key() in recording.keys))
"""
    completed = run_python(record, tmp_path, METAJIT_CACHE_DIR=str(tmp_path / "cache"))
    assert completed.returncode == 0, completed.stderr
    assert int(completed.stdout) == int("+avx512f" not in mj._core.host_cpu_features())
    deploy = f"""
import numpy as np, metajit as mj
{values}
print(int(np.array_equal(values, np.load({str(tmp_path / 'late.npy')!r}))), int(mj.stats()["kernels_compiled"]))
"""
    completed = run_python(deploy, tmp_path, METAJIT_CACHE_DIR=str(tmp_path / "empty-cache"),
                           METAJIT_COMPILE="never", METAJIT_BUNDLE=str(tmp_path / "late.mjb"))
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["1", "0"]


def test_compile_never_without_bundle_names_the_kernel_and_user_line(tmp_path):
    completed = run_python(MODEL + "result.numpy()\n", tmp_path, METAJIT_CACHE_DIR=str(tmp_path / "empty"),
                           METAJIT_COMPILE="never")
    assert completed.returncode != 0
    assert "MissingKernelError" in completed.stderr
    assert "METAJIT_COMPILE=never" in completed.stderr
    assert "created at <string>:" in completed.stderr


def flip_byte(source, destination, position):
    data = bytearray(source.read_bytes())
    data[position] ^= 0x01
    destination.write_bytes(bytes(data))


def test_flipped_byte_in_an_entry_is_refused(recorded, tmp_path):
    original = recorded / "model.mjb"
    size = original.stat().st_size
    flip_byte(original, tmp_path / "flipped.mjb", size - 100)  # inside the last kernel
    with pytest.raises(mj.cache.BundleError, match="fails its checksum"):
        mj.cache.load_bundle(tmp_path / "flipped.mjb")


def test_flipped_byte_in_the_manifest_is_refused(recorded, tmp_path):
    original = recorded / "model.mjb"
    header_end = original.read_bytes().index(b"\n", len(bundle_format.MAGIC))
    flip_byte(original, tmp_path / "flipped.mjb", header_end + 20)
    with pytest.raises(mj.cache.BundleError, match="manifest fails its checksum"):
        mj.cache.load_bundle(tmp_path / "flipped.mjb")


def test_truncated_bundle_and_foreign_file_are_refused(recorded, tmp_path):
    data = (recorded / "model.mjb").read_bytes()
    (tmp_path / "short.mjb").write_bytes(data[:-10])
    with pytest.raises(mj.cache.BundleError):
        mj.cache.load_bundle(tmp_path / "short.mjb")
    (tmp_path / "other.mjb").write_bytes(b"PK\x03\x04 not a bundle")
    with pytest.raises(mj.cache.BundleError, match="not a metajit bundle"):
        mj.cache.load_bundle(tmp_path / "other.mjb")


def foreign_copy(recorded, tmp_path):
    """The recorded bundle, rewritten (with valid checksums) as if built for another CPU."""
    manifest, entries = bundle_format.read_bundle(str(recorded / "model.mjb"))
    manifest["cpu"] = "some-other-cpu"
    manifest_bytes = json.dumps(manifest).encode()
    path = tmp_path / "foreign.mjb"
    with open(path, "wb") as file:
        file.write(bundle_format.MAGIC)
        file.write(f"{bundle_format.FORMAT} {len(manifest_bytes)} {bundle_format._sha256(manifest_bytes)}\n".encode())
        file.write(manifest_bytes)
        for _, data in entries:
            file.write(data)
    return path


def test_incompatible_target_is_refused(recorded, tmp_path):
    path = foreign_copy(recorded, tmp_path)
    before = mj._core.bundle_entry_count()
    with pytest.warns(RuntimeWarning, match="built for CPU some-other-cpu"):
        mj.cache.load_bundle(path)
    assert mj._core.bundle_entry_count() == before  # nothing served from it
    mj.cache.set_compile_policy("never")
    try:
        with pytest.raises(mj.cache.BundleError, match="METAJIT_COMPILE=never"):
            mj.cache.load_bundle(path)
    finally:
        mj.cache.set_compile_policy("auto")


def test_pack_command_records_a_script(tmp_path):
    # The script records a part of itself too: recordings nest.
    (tmp_path / "script.py").write_text(MODEL + "with mj.cache.record() as part:\n    result.numpy()\n"
                                        "assert len(part) >= 3, part\n")
    environment = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT), METAJIT_CACHE_DIR=str(tmp_path / "cache"))
    completed = subprocess.run([sys.executable, "-m", "metajit.cache", "pack", "--output", "packed.mjb", "--",
                                sys.executable, "script.py"], env=environment, cwd=tmp_path, capture_output=True,
                               text=True)
    assert completed.returncode == 0, completed.stderr
    assert "packed" in completed.stdout
    manifest, entries = bundle_format.read_bundle(str(tmp_path / "packed.mjb"))
    assert len(entries) >= 3 and manifest["abi_version"] == mj._core.abi_version()


def cli(tmp_path, *arguments):
    environment = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT), METAJIT_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", "metajit.cache", *arguments], env=environment, cwd=tmp_path,
                          capture_output=True, text=True)


def test_cache_cli_info_list_show_verify_clear(tmp_path):
    populate = run_python(MODEL + "result.numpy()\n", tmp_path, METAJIT_CACHE_DIR=str(tmp_path / "cache"))
    assert populate.returncode == 0, populate.stderr
    info = cli(tmp_path, "info")
    assert info.returncode == 0 and str(tmp_path / "cache") in info.stdout
    listing = cli(tmp_path, "list")
    keys = [line.split()[0] for line in listing.stdout.splitlines()]
    assert len(keys) >= 3
    assert any("code op created at <string>" in line for line in listing.stdout.splitlines())
    shown = cli(tmp_path, "show", keys[0][:10])
    assert shown.returncode == 0 and "metajit_kernel(" in shown.stdout  # C++ or CUDA source
    assert cli(tmp_path, "show", "zzzz").returncode == 1
    assert cli(tmp_path, "verify").returncode == 0
    # Corrupt one entry on disk: verify discards it and says so.
    entry = next((tmp_path / "cache").rglob(keys[0] + ".mjk"))
    data = bytearray(entry.read_bytes())
    data[-5] ^= 0xFF
    entry.write_bytes(bytes(data))
    verified = cli(tmp_path, "verify")
    assert verified.returncode == 1 and "1 discarded" in verified.stdout
    assert cli(tmp_path, "clear").returncode == 0
    assert cli(tmp_path, "list").stdout.strip() == ""
