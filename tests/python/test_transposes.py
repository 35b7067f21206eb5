"""Transposing kernels: an input read with a large stride along the output's last dim and contiguously along an
earlier dim is walked in 16 x 16 tiles (jit/cpp_renderer.cc, transposed_body). The tiles must cover every
element exactly once, for any extents (not multiples of the tile), ranks, dtypes and fused work."""
import numpy as np
import pytest

import metajit as mj


def kernel_sources(var):
    return [kernel["source"] for kernel in mj.inspect_kernels(var)]


def tiled(var):
    return any("across_tile" in source for source in kernel_sources(var))


@pytest.mark.parametrize("shape, permutation", [
    ((1024, 1024), (1, 0)),
    ((33, 47), (1, 0)),            # neither extent a multiple of 16
    ((17, 9), (1, 0)),             # one partial tile of the last dim
    ((20, 37, 19), (2, 1, 0)),     # the contiguous dim two dims away from the last
    ((3, 40, 24, 20), (0, 2, 3, 1)),  # NCHW -> NHWC
    ((3, 20, 24, 40), (0, 3, 1, 2)),  # NHWC -> NCHW
    ((2, 3, 50, 30), (0, 1, 3, 2)),   # batched matrix transpose
])
def test_transposes_are_tiled_and_exact(rng, shape, permutation):
    data = rng.standard_normal(shape).astype(np.float32)
    result = mj.array(data).permute(*permutation)
    assert tiled(result)
    np.testing.assert_array_equal(result.numpy(), data.transpose(permutation))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64, np.uint8, np.int8, np.bool_])
def test_tiled_transposes_of_every_dtype(rng, dtype):
    data = (rng.standard_normal((45, 70)) * 50).astype(dtype)
    result = mj.array(data).T
    assert tiled(result)
    np.testing.assert_array_equal(result.numpy(), data.T)


def test_fused_work_on_a_transposed_and_a_contiguous_input(rng):
    a = rng.standard_normal((70, 90)).astype(np.float32)
    b = rng.standard_normal((90, 70)).astype(np.float32)
    x, y = mj.array(a), mj.array(b)
    result = (x.T * 2.0 + y).exp() - y.relu()
    assert tiled(result)
    expected = np.exp(a.T.astype(np.float64) * 2 + b) - np.maximum(b, 0)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_tiles_prefetch_the_strided_lines_of_the_next_tile(rng):
    data = rng.standard_normal((64, 48)).astype(np.float32)
    result = mj.array(data).T
    assert any("__builtin_prefetch(&in0[" in source for source in kernel_sources(result))
    np.testing.assert_array_equal(result.numpy(), data.T)


def test_contiguous_and_short_strided_reads_are_not_tiled(rng):
    data = rng.standard_normal((64, 64)).astype(np.float32)
    x = mj.array(data)
    assert not tiled(x * 2.0 + 1.0)
    # A last dim of 4 read with stride 64 is less than half a tile: rows stay the unit of work.
    small = mj.array(rng.standard_normal((64, 4)).astype(np.float32))
    assert not tiled(small.T.T * 1.0)


def test_gradient_through_a_transpose(rng):
    a = rng.standard_normal((40, 56)).astype(np.float32)
    w = rng.standard_normal((56, 40)).astype(np.float32)
    x = mj.array(a, requires_grad=True)
    gradient = mj.grad((x.T * mj.array(w)).exp().sum(), x)
    np.testing.assert_allclose(gradient.numpy(), (w * np.exp(a.T * w)).T, rtol=1e-4, atol=1e-5)
