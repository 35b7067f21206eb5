"""Creation ops: array (dtype rules for numpy, lists and Python numbers), zeros/ones/full and their _like forms,
arange (integer and float), rand/randn (seeded reproducibility, range, mean and standard deviation), and 0-d and
empty (0-size) tensors flowing through elementwise ops, views and reductions."""
import numpy as np
import pytest

import metajit as mj
from conftest import ALL_DTYPES, assert_close


# ---------------------------------------------------------------------------------------------------- array
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_array_keeps_numpy_dtype_and_values(dtype, rng):
    data = (rng.standard_normal((3, 5)) * 50).astype(dtype)
    x = mj.array(data)
    assert x.dtype == dtype and x.shape == (3, 5) and x.ndim == 2 and x.numel() == 15
    assert x.size() == (3, 5) and x.size(-1) == 5
    assert x.is_computed
    assert_close(x, data, rtol=0)


def test_array_from_python_values_follows_pytorch_defaults():
    assert mj.array(1.5).dtype == "float32"
    assert mj.array(3).dtype == "int64"
    assert mj.array(True).dtype == "bool"
    assert mj.array([1, 2, 3]).dtype == "int64"
    assert mj.array([[1.0, 2], [3, 4]]).dtype == "float32"
    assert_close(mj.array([[1.0, 2], [3, 4]]), np.array([[1, 2], [3, 4]], np.float32), rtol=0)
    assert_close(mj.array([True, False]), np.array([True, False]))


def test_array_from_numpy_scalars_keeps_their_dtype():
    assert mj.array(np.float64(2.5)).dtype == "float64"
    assert mj.array(np.int32(7)).dtype == "int32"
    assert mj.array(np.float16(1.5)).dtype == "float16"
    assert_close(mj.array(np.float64(0.1)), np.float64(0.1), rtol=0)


def test_array_with_dtype_argument_and_from_var(rng):
    data = rng.standard_normal(6)
    assert_close(mj.array(data, dtype="float32"), data.astype(np.float32), rtol=0, dtype="float32")
    assert_close(mj.array([1.7, -2.7], dtype=int), np.array([1, -2], np.int64), dtype="int64")
    assert_close(mj.array(data, dtype=np.float16), data.astype(np.float16), rtol=0, dtype="float16")
    x = mj.array(data)
    assert mj.array(x) is x
    assert mj.array(x, dtype="float32").dtype == "float32"


def test_array_copies_its_input(rng):
    data = rng.standard_normal(8).astype(np.float32)
    x = mj.array(data)
    original = data.copy()
    data[:] = 0
    assert_close(x, original, rtol=0)


def test_array_from_non_contiguous_numpy(rng):
    data = rng.standard_normal((6, 8)).astype(np.float32)
    for view in (data.T, data[::2, 1::3], data[:, ::-1], np.broadcast_to(data[0], (3, 8))):
        assert_close(mj.array(view), view, rtol=0)


# ---------------------------------------------------------------------------------------------------- constants
def test_zeros_ones_full():
    assert_close(mj.zeros(2, 3), np.zeros((2, 3), np.float32), dtype="float32")
    assert_close(mj.zeros((2, 3)), np.zeros((2, 3), np.float32))
    assert_close(mj.ones([4], dtype="int32"), np.ones(4, np.int32), dtype="int32")
    assert_close(mj.ones(2, 2, dtype=np.float64), np.ones((2, 2)), dtype="float64")
    assert_close(mj.full((2, 2), 7), np.full((2, 2), 7, np.int64), dtype="int64")
    assert_close(mj.full(3, 2.5), np.full(3, 2.5, np.float32), dtype="float32")
    assert_close(mj.full([2], True), np.array([True, True]), dtype="bool")
    assert_close(mj.full((2,), -1, dtype="uint8"), np.full(2, 255, np.uint8), dtype="uint8")
    assert_close(mj.full((3,), np.inf), np.full(3, np.inf, np.float32))
    assert mj.zeros().shape == ()


def test_full_int64_keeps_large_values_exactly():
    value = 2 ** 53 + 1
    assert_close(mj.full((2,), value), np.full(2, value, np.int64), dtype="int64")
    assert_close(mj.array(np.zeros(2, np.int64)) + value, np.full(2, value, np.int64), dtype="int64")


def test_zeros_like_ones_like(rng):
    x = mj.array(rng.integers(0, 5, size=(2, 3)).astype(np.int32))
    assert_close(mj.zeros_like(x), np.zeros((2, 3), np.int32), dtype="int32")
    assert_close(mj.ones_like(x, dtype="float16"), np.ones((2, 3), np.float16), dtype="float16")


# ---------------------------------------------------------------------------------------------------- arange
@pytest.mark.parametrize("arguments", [(5,), (2, 9), (10, 0, -3), (0, 10, 3), (10, 0), (-4, 4, 1), (0,)], ids=repr)
def test_integer_arange(arguments):
    assert_close(mj.arange(*arguments), np.arange(*arguments, dtype=np.int64), dtype="int64")


@pytest.mark.parametrize("arguments", [(0, 1, 0.1), (1, 2, 0.25), (3.0,), (-1.5, 1.5, 0.5), (5, 0, -0.75),
                                       (0, 0.3, 0.1)], ids=repr)
def test_float_arange(arguments):
    expected = np.arange(*arguments).astype(np.float32)
    assert_close(mj.arange(*arguments), expected, rtol=1e-6, atol=1e-7, dtype="float32")


def test_arange_with_dtype():
    assert_close(mj.arange(0, 10, 3, dtype="float64"), np.arange(0, 10, 3, dtype=np.float64), dtype="float64")
    assert_close(mj.arange(0, 2.5, 0.5, dtype="float64"), np.arange(0, 2.5, 0.5), rtol=0, dtype="float64")
    assert_close(mj.arange(6, dtype="int32").reshape(2, 3) * 2, np.arange(6, dtype=np.int32).reshape(2, 3) * 2)


# ---------------------------------------------------------------------------------------------------- random
def test_seed_makes_random_numbers_reproducible():
    mj.seed(123)
    first = (mj.randn(100).numpy().copy(), mj.rand(3, 4).numpy().copy())
    mj.seed(123)
    second = (mj.randn(100).numpy().copy(), mj.rand(3, 4).numpy().copy())
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    mj.seed(124)
    assert not np.array_equal(mj.randn(100).numpy(), first[0])


def test_rand_and_randn_statistics():
    mj.seed(2024)
    uniform = mj.rand(200000).numpy().astype(np.float64)
    assert uniform.min() >= 0 and uniform.max() < 1
    assert abs(uniform.mean() - 0.5) < 0.005 and abs(uniform.var() - 1 / 12) < 0.002
    normal = mj.randn(400, 500).numpy().astype(np.float64)
    assert normal.shape == (400, 500)
    assert abs(normal.mean()) < 0.01 and abs(normal.std() - 1) < 0.01
    assert 0.66 < np.mean(np.abs(normal) < 1) < 0.70  # about 68.3% within one standard deviation


def test_random_dtypes():
    assert mj.randn(3, dtype="float64").dtype == "float64"
    assert mj.rand((2, 2), dtype="float16").dtype == "float16"
    assert mj.randn([5]).dtype == "float32" and mj.randn([5]).shape == (5,)


# ---------------------------------------------------------------------------------------------------- 0-d and empty
def test_zero_dimensional_tensors(rng):
    value = np.float32(2.5)
    x = mj.array(value)
    assert x.shape == () and x.ndim == 0 and x.numel() == 1
    assert_close(x * 2 + 1, np.float32(6.0), dtype="float32")
    assert (x * 2).item() == 5.0
    assert float(x) == 2.5 and int(mj.array(7)) == 7 and bool(mj.array(True))
    assert_close(x.exp().sum(), np.exp(np.float64(2.5)), rtol=1e-6)
    assert_close(x.reshape(1, 1), np.full((1, 1), 2.5, np.float32))
    matrix = rng.standard_normal((3, 4)).astype(np.float32)
    assert_close(mj.array(matrix) * x, matrix * value, rtol=1e-6)
    assert_close(mj.array(matrix).sum(), matrix.astype(np.float64).sum(), rtol=1e-5)
    assert mj.array(matrix).sum().shape == ()


def test_empty_tensors(rng):
    empty = np.zeros((0, 4), np.float32)
    x = mj.array(empty)
    assert x.numel() == 0 and x.shape == (0, 4)
    assert_close((x.exp() * 2 + 1), empty)
    assert_close(x.T, empty.T)
    assert_close(x.sum(0), np.zeros(4, np.float32))
    assert_close(x.amax(1), np.zeros(0, np.float32))
    assert_close(x.reshape(2, 0, 2), empty.reshape(2, 0, 2))
    assert_close(x + mj.array(rng.standard_normal(4).astype(np.float32)), empty)
    assert_close(x[1:], empty[1:])
    assert_close(mj.array(np.zeros((3, 4), np.float32))[3:], np.zeros((0, 4), np.float32))
    assert_close(mj.reindex(x, [2, 4], ["i0", "i1"], overflow_value=5.0), np.full((2, 4), 5.0, np.float32))
    assert_close(mj.zeros(0), np.zeros(0, np.float32))
    assert_close(mj.arange(0), np.zeros(0, np.int64))
