"""Position-independent kernels (jit/ir/launch_offsets.h): a constant offset that every read of an input adds (x[t]
of a sequence) is added to the buffer's address at launch instead of being compiled into the kernel, so the
kernels of x[0], x[1], ... share one source and one cache key. Each check compares the values with numpy and
the kernels' keys across offsets with each other."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from conftest import cpu_backend

pytestmark = cpu_backend  # the CPU backend's kernel text and keys


def keys_and_headers(*vars):
    kernels = [kernel for kernel in mj.inspect(*vars) if not kernel.library or kernel.key]
    return [kernel.key for kernel in kernels], [kernel.header for kernel in kernels]


def test_slices_of_a_sequence_share_one_kernel(rng):
    data = rng.standard_normal((9, 5, 37)).astype(np.float32)
    x = mj.array(data)
    keys = set()
    for step in range(9):
        y = (x[step] * 3.0 + 1.0).tanh()
        step_keys, headers = keys_and_headers(y)
        keys.update(step_keys)
        if step:
            assert any(f"starts {step * 5 * 37} elements into its buffer" in header for header in headers)
            kernel, = mj.inspect(y)
            assert kernel.buffer_offsets == [0, step * 5 * 37], kernel.buffer_offsets
        np.testing.assert_allclose(y.numpy(), np.tanh(data[step].astype(np.float64) * 3 + 1), rtol=1e-5, atol=1e-6)
    assert len(keys) == 1


def test_two_reads_of_one_buffer_keep_their_distance(rng):
    """x[t] + x[t + 2] * x[t + 1][:, 1:] moves the smallest offset; the others stay relative to it."""
    data = rng.standard_normal((8, 4, 11)).astype(np.float32)
    x = mj.array(data)
    keys = set()
    for step in range(6):
        y = x[step][:, :10] + x[step + 2][:, :10] * x[step + 1][:, 1:]
        keys.update(keys_and_headers(y)[0])
        expected = data[step, :, :10] + data[step + 2, :, :10].astype(np.float64) * data[step + 1, :, 1:]
        np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6, atol=1e-6)
    assert len(keys) == 1


def test_reductions_rows_and_gathers_over_slices(rng):
    data = rng.standard_normal((6, 16, 40)).astype(np.float32)
    index_data = rng.integers(0, 40, size=(16, 7))
    x, index = mj.array(data), mj.array(index_data)
    keys = {"sum": set(), "softmax": set(), "gather": set(), "columns": set()}
    for step in range(1, 6):
        results = {"sum": x[step].sum(1), "softmax": F.softmax(x[step], 1), "gather": x[step].gather(1, index),
                   "columns": x[step, :, 3:9].sum(0)}
        row = data[step].astype(np.float64)
        shifted = np.exp(row - row.max(1, keepdims=True))
        expected = {"sum": row.sum(1), "softmax": shifted / shifted.sum(1, keepdims=True),
                    "gather": np.take_along_axis(row, index_data, 1), "columns": row[:, 3:9].sum(0)}
        for name, result in results.items():
            keys[name].update(keys_and_headers(result)[0])
            np.testing.assert_allclose(result.numpy(), expected[name], rtol=1e-5, atol=1e-6, err_msg=name)
    for name, found in keys.items():
        assert len(found) == 1, name


@pytest.mark.parametrize("dtype", ["float16", "bool", "int64", "float64"])
def test_offsets_count_elements_of_the_buffers_own_type(rng, dtype):
    data = (rng.standard_normal((5, 3, 33)) > 0) if dtype == "bool" else \
        (rng.standard_normal((5, 3, 33)) * 10).astype(dtype)
    x = mj.array(data)
    keys = set()
    for step in range(5):
        y = mj.where(x[step], 1.0, -1.0) if dtype == "bool" else x[step] * 2
        keys.update(keys_and_headers(y)[0])
        expected = np.where(data[step], 1.0, -1.0) if dtype == "bool" else data[step] * 2
        np.testing.assert_array_equal(y.numpy(), expected.astype(y.numpy().dtype))
    assert len(keys) == 1


def test_a_single_element_read_at_a_constant_position(rng):
    """x[t, 2] broadcast over a row: the whole offset is constant, so the kernel reads its input's element 0."""
    data = rng.standard_normal((7, 5)).astype(np.float32)
    other = rng.standard_normal(64).astype(np.float32)
    x, y = mj.array(data), mj.array(other)
    keys = set()
    for step in range(7):
        result = y * x[step, 2]
        keys.update(keys_and_headers(result)[0])
        np.testing.assert_allclose(result.numpy(), other * data[step, 2], rtol=1e-6)
    assert len(keys) == 1


def test_library_epilogue_reading_a_slice(rng):
    """A recurrent step's projection[t] + h @ W^T + b: the oneDNN call's epilogue reads the slice at an offset."""
    projection = rng.standard_normal((6, 4, 24)).astype(np.float32)
    hidden = rng.standard_normal((4, 8)).astype(np.float32)
    weight = rng.standard_normal((24, 8)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    p, h, w, b = (mj.array(value) for value in (projection, hidden, weight, bias))
    keys = set()
    for step in range(6):
        result = p[step] + F.linear(h, w, b)
        keys.update(key for key in keys_and_headers(result)[0] if key)
        expected = projection[step] + hidden.astype(np.float64) @ weight.T + bias
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert len(keys) <= 1


def test_lstm_steps_share_their_kernels(rng):
    """Before: one kernel per step for the step's slice of the input projection (69 kernels for 64 steps)."""
    layer = mj.nn.LSTM(64, 128)
    data = rng.standard_normal((48, 16, 64)).astype(np.float32)
    with mj.no_grad():
        output = layer(mj.array(data))[0]
    kernels = mj.inspect(output)
    distinct = {kernel.key for kernel in kernels if kernel.key}
    assert len(kernels) > 48 and len(distinct) < 16, (len(kernels), len(distinct))
