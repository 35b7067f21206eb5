"""Shared setup of the Python test suite: makes the in-tree package importable, points the kernel cache at one
shared folder (the Makefile's, unless METAJIT_CACHE_DIR is already set) and provides numpy comparison helpers.
Every numeric check compares against numpy with explicit tolerances; nothing is compared with metajit itself."""
import contextlib
import os
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The package under test: the in-tree one, or another build's copy (make test-asan sets this to its own).
PACKAGE_ROOT = pathlib.Path(os.environ.get("METAJIT_TEST_PACKAGE_ROOT", str(ROOT / "python")))
if str(PACKAGE_ROOT) not in sys.path:
    sys.path.insert(0, str(PACKAGE_ROOT))
# Must happen before metajit is imported: the kernel cache reads it once.
os.environ.setdefault("METAJIT_CACHE_DIR", str(ROOT / "build" / "test-kernel-cache"))

import metajit as mj  # noqa: E402

# The suite also runs with every kernel on the GPU (METAJIT_DEVICE=cuda, tools/gpu_device/run_checks.sh). Tests of
# the CPU backend's own machinery (its C++ kernel text and vector code, oneDNN library calls, the CPU kernel cache
# and its compile counts) check nothing there, so they are skipped under CUDA execution; make test runs them all.
CUDA_EXECUTION = mj.flags.use_cuda is not False
if CUDA_EXECUTION:  # PyTorch on the GPU lets cuDNN and cuBLAS round operands to TF32; metajit computes float32
    try:
        import torch
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    except ImportError:
        pass
cpu_backend = pytest.mark.skipif(CUDA_EXECUTION, reason="checks the CPU backend; kernels run as CUDA kernels here")

ALL_DTYPES = ["bool", "int8", "uint8", "int32", "int64", "float16", "float32", "float64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
INT_DTYPES = ["int8", "uint8", "int32", "int64"]


# The vector widths a kernel is compiled at by run_kernel_program: the JIT only runs the host's.
VECTOR_TARGETS = pytest.mark.parametrize("target", [["-march=native"], ["-mavx2", "-mfma", "-mno-avx512f"], []],
                                         ids=["native", "avx2", "sse"])


def run_kernel_program(tmp_path, kernel, main, compiler_name, target):
    """Compiles a kernel's full source followed by `main` (C++ that calls metajit_kernel and prints numbers) with
    `compiler_name` for `target` flags, runs it, and returns what it printed as float64s."""
    import shutil
    import subprocess
    compiler = shutil.which(compiler_name)
    assert compiler, f"{compiler_name} (installed by tools/install_dependencies.sh) is needed for this check"
    (tmp_path / "program.cc").write_text(kernel.full_source + main)
    binary = tmp_path / "program"
    subprocess.run([compiler, "-O2", *target, str(tmp_path / "program.cc"), "-o", str(binary)], check=True,
                   capture_output=True)
    return np.array(subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split(),
                    dtype=np.float64)


def assert_close(actual, expected, rtol=1e-6, atol=0.0, equal_nan=False, dtype=None):
    """actual: a metajit Var (or numpy array); expected: numpy. Shapes must match exactly; if `dtype` is given the
    Var's dtype must be that."""
    if isinstance(actual, mj.Var):
        if dtype is not None:
            assert actual.dtype == np.dtype(dtype).name, f"dtype {actual.dtype}, expected {np.dtype(dtype).name}"
        actual = actual.numpy()
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape}, expected {expected.shape}"
    if actual.dtype == np.bool_ or expected.dtype == np.bool_ or (
            np.issubdtype(actual.dtype, np.integer) and np.issubdtype(expected.dtype, np.integer)):
        np.testing.assert_array_equal(actual, expected)
        return
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=equal_nan)


def random_array(rng, shape, dtype, low=-5, high=5):
    """Random values of `dtype` in [low, high] (bools are random; uint8 clips low at 0)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(low, info.min), min(high, info.max) + 1, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def launched(function):
    """Runs function() and returns (its result, number of kernels it launched)."""
    mj.reset_stats()
    result = function()
    return result, int(mj.stats()["kernels_launched"])


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@contextlib.contextmanager
def flag_set(name, value):
    """mj.flags.<name> = value inside the block, restored after it."""
    previous = getattr(mj.flags, name)
    setattr(mj.flags, name, value)
    try:
        yield
    finally:
        setattr(mj.flags, name, previous)
