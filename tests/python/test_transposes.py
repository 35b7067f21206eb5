"""Transposing kernels: an input read with a large stride along the output's last dim and contiguously along an
earlier dim is walked in 16 x 16 tiles (jit/codegen/cpp/cpp_renderer.cc, transposed_body). The tiles must cover every
element exactly once, for any extents (not multiples of the tile), ranks, dtypes and fused work. Full tiles of
float32 kernels transpose through registers (full_tile_vectors, mj_transpose_tile), at every vector width."""
import numpy as np
import pytest

import metajit as mj
from conftest import VECTOR_TARGETS, cpu_backend, run_kernel_program


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
    # A tile is full when both of its dims (the output's last and the input's contiguous one) reach 16.
    full_tiles = result.shape[-1] >= 16 and shape[-1] >= 16
    assert any("mj_transpose_tile(" in source for source in kernel_sources(result)) == full_tiles
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


def test_full_tiles_transpose_every_strided_input_next_to_contiguous_and_broadcast_ones(rng):
    a = rng.standard_normal((48, 40)).astype(np.float32)
    b = rng.standard_normal((48, 40)).astype(np.float32)
    c = rng.standard_normal((40, 48)).astype(np.float32)
    row = rng.standard_normal((1, 48)).astype(np.float32)
    result = (mj.array(a).T + mj.array(b).T * mj.array(row)).exp() + mj.array(c)
    (source,) = kernel_sources(result)
    assert source.count("mj_transpose_tile(&") == 2, source
    expected = np.exp(a.T.astype(np.float64) + b.T * row) + c
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_full_tiles_keep_the_scalar_loop_when_the_body_has_no_vector_form(rng):
    data = (rng.standard_normal((48, 40)) * 10).astype(np.float32)
    result = mj.array(data).T.floor()  # floor has no vector form in the renderer
    (source,) = kernel_sources(result)
    assert "across_tile" in source and "mj_transpose_tile(" not in source
    np.testing.assert_array_equal(result.numpy(), np.floor(data.T))


TILE_CHECK = r"""
extern "C" int printf(const char*, ...);
int main() {
  static float input[48 * 40], output[40 * 48];
  for (int i = 0; i < 48 * 40; ++i) { input[i] = (float)i; output[i] = -1.0f; }
  void* buffers[2] = {output, input};
  metajit_kernel(buffers, 0, 9);  // 3 x 3 tiles: the 40 rows of the output are 16 + 16 + 8
  for (int i = 0; i < 40 * 48; ++i) printf("%.9g\n", output[i]);
  return 0;
}
"""


@pytest.mark.parametrize("compiler_name", ["clang++-14", "g++"])
@VECTOR_TARGETS
@cpu_backend
def test_tile_transposes_at_every_width_and_with_gcc(tmp_path, compiler_name, target):
    # The JIT only runs the host's width: the 8- and 4-lane transposes (and g++, the subprocess fallback) run here.
    kernel = mj.inspect(mj.array(np.zeros((48, 40), np.float32)).T * 1.0)[0]
    assert "mj_transpose_tile(" in kernel.source
    output = run_kernel_program(tmp_path, kernel, TILE_CHECK, compiler_name, target).reshape(40, 48)
    np.testing.assert_array_equal(output, np.arange(48 * 40, dtype=np.float32).reshape(48, 40).T)
