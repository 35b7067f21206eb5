"""numpy interoperability: .numpy() is zero-copy and read-only and outlives its Var, item() and the Python number
protocols, __array__ (np.asarray(var), with a dtype, with copy), numpy arrays and numpy scalars as operands on
either side, float16 round trips, and repr."""
import gc

import numpy as np
import pytest

import metajit as mj
from conftest import assert_close


def test_numpy_is_zero_copy_and_read_only(rng):
    data = rng.standard_normal((4, 5)).astype(np.float32)
    x = mj.array(data) * 2
    first, second = x.numpy(), x.numpy()
    assert np.shares_memory(first, second)
    assert not first.flags.writeable
    assert first.flags.c_contiguous and first.dtype == np.float32 and first.shape == (4, 5)
    with pytest.raises(ValueError):
        first[0, 0] = 1.0
    np.testing.assert_allclose(first, data * 2, rtol=1e-6)


def test_numpy_array_outlives_its_var(rng):
    data = rng.standard_normal(1000).astype(np.float32)
    x = mj.array(data) + 1
    result = x.numpy()
    del x
    gc.collect()
    mj.gc()
    for _ in range(3):  # reuse of freed blocks must not overwrite the array
        (mj.array(np.zeros(1000, np.float32)) + 5).numpy()
    np.testing.assert_allclose(result, data + 1, rtol=1e-6)


def test_numpy_of_views_is_contiguous(rng):
    data = rng.standard_normal((6, 4)).astype(np.float32)
    result = mj.array(data).T[::2].numpy()
    assert result.flags.c_contiguous
    np.testing.assert_array_equal(result, data.T[::2])


def test_item_and_python_number_protocols():
    assert mj.array(np.float32(2.5)).item() == 2.5
    assert isinstance(mj.array(np.float32(2.5)).item(), float)
    assert mj.array(np.array([[7]], np.int64)).item() == 7
    assert isinstance(mj.array(np.int32(7)).item(), int)
    assert mj.array(np.array([True])).item() is True
    assert (mj.array([3, 4]).sum()).item() == 7
    assert float(mj.array([2.0]) * 3) == 6.0
    assert int(mj.array(np.float32(3.7))) == 3
    assert bool(mj.array(0.0)) is False
    value = mj.array(np.array([1.5], np.float64)).item()
    assert value == 1.5 and isinstance(value, float)


def test_array_protocol(rng):
    data = rng.standard_normal((3, 3)).astype(np.float32)
    x = mj.array(data) + 1
    result = np.asarray(x)
    assert isinstance(result, np.ndarray) and result.dtype == np.float32
    np.testing.assert_allclose(result, data + 1, rtol=1e-6)
    as_double = np.asarray(x, dtype=np.float64)
    assert as_double.dtype == np.float64
    np.testing.assert_allclose(as_double, (data + 1).astype(np.float64), rtol=1e-6)
    copied = np.array(x, copy=True)
    assert copied.flags.writeable and not np.shares_memory(copied, x.numpy())
    np.testing.assert_allclose(np.exp(x), np.exp(data + 1), rtol=1e-6)  # numpy functions accept a Var


def test_numpy_array_operands_on_either_side(rng):
    data = rng.standard_normal((2, 3)).astype(np.float32)
    other = rng.standard_normal((2, 3)).astype(np.float32)
    x = mj.array(data)
    for result, expected in [(x * other, data * other), (other * x, other * data), (other - x, other - data),
                             (x / other, data / other), (other > x, other > data)]:
        assert isinstance(result, mj.Var)
        assert_close(result, expected, rtol=1e-6)


@pytest.mark.parametrize("scalar", [np.float32(2.5), np.float64(2.5), np.int64(3), np.int32(-2), np.uint8(7),
                                    np.float16(0.5), np.bool_(True)], ids=repr)
def test_numpy_scalars_act_as_python_numbers(scalar, rng):
    data = rng.uniform(1, 3, size=(2, 5)).astype(np.float32)
    x = mj.array(data)
    number = scalar.item()
    for result, expected in [(x + scalar, data + np.float32(number)), (scalar * x, np.float32(number) * data),
                             (scalar - x, np.float32(number) - data), (x > scalar, data > number)]:
        assert isinstance(result, mj.Var), type(result)
        assert_close(result, expected, rtol=1e-6, dtype=expected.dtype)
    integers = mj.array(np.arange(5, dtype=np.int32))
    if isinstance(number, int) and not isinstance(number, bool):
        assert (integers * scalar).dtype == "int32"  # a scalar never widens the tensor's dtype
        assert_close(integers * scalar, np.arange(5, dtype=np.int64) * number)


def test_large_integer_scalars_are_exact():
    x = mj.array(np.arange(3, dtype=np.int64))
    big = 2 ** 62 + 1
    assert_close(x + big, np.arange(3, dtype=np.int64) + big, dtype="int64")
    assert_close(big - x, big - np.arange(3, dtype=np.int64), dtype="int64")
    assert_close(x * 2 ** 40, np.arange(3, dtype=np.int64) * 2 ** 40)
    assert_close(x == 2 ** 53 + 1, np.zeros(3, bool))
    with pytest.raises(ValueError, match="does not fit in int64"):
        x + 2 ** 70
    assert_close(mj.array(np.ones(2, np.float32)) + 2 ** 70, np.full(2, 2.0 ** 70, np.float32), rtol=1e-6)


def test_float16_round_trip(rng):
    data = (rng.standard_normal(1000) * 100).astype(np.float16)
    data[:6] = np.array([0, -0.0, 65504, -65504, 6e-8, np.inf], dtype=np.float16)
    x = mj.array(data)
    assert x.dtype == "float16"
    np.testing.assert_array_equal(x.numpy(), data)
    np.testing.assert_array_equal((x * 1).numpy(), data)  # through a kernel: load, compute in float32, store
    np.testing.assert_array_equal(x.astype("float32").astype("float16").numpy(), data)
    wide = rng.standard_normal(1000).astype(np.float32) * 1000
    np.testing.assert_array_equal(mj.array(wide).astype("float16").numpy(), wide.astype(np.float16))
    tiny = np.float32([1e-8, 3e-8, 5.96e-8, 1e-5, 65519, 65520, 1e6, -1e6, np.nan])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(mj.array(tiny).astype("float16").numpy(), tiny.astype(np.float16))


def test_repr_names_shape_dtype_and_laziness():
    x = mj.array(np.zeros((2, 3), np.float32))
    lazy = x + 1
    assert "shape=[2, 3]" in repr(lazy) and "float32" in repr(lazy) and "lazy" in repr(lazy)
    lazy.numpy()
    assert "lazy" not in repr(lazy)
