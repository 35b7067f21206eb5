"""Index values on vector lanes (jit/codegen/cpp/vector_expression_renderer.cc, mj_index_lanes in the C++ prelude):
masks and values computed from the element loop's own index, a causal mask's j <= i or an arange, run as int64 (and
float64) lanes inside the explicit-SIMD loops instead of sending the whole loop back to scalar code. Checked against
numpy in float64, at the host's width and, through clang++, at 256 and 128 bits."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from conftest import assert_close, cpu_backend
from test_vector_rows import kernel_sources, numpy_softmax, partial_check_output

pytestmark = cpu_backend  # the CPU backend's own kernels (conftest.cpu_backend)


def causal_scores(rng, rows, columns, batch=2):
    scores = (rng.standard_normal((batch, rows, columns)) * 3).astype(np.float32)
    query = mj.arange(0, rows, 1, "int64").reshape([rows, 1])
    key = mj.arange(0, columns, 1, "int64").reshape([1, columns])
    allowed = np.arange(columns)[None, :] <= np.arange(rows)[:, None]
    return scores, mj.where(key <= query, mj.array(scores), float("-inf")), allowed


@pytest.mark.parametrize("columns", [1, 15, 16, 17, 37, 64, 100, 257])
def test_causal_softmax_runs_on_vectors_and_matches_numpy(rng, columns):
    scores, masked, allowed = causal_scores(rng, 9, columns)
    result = F.softmax(masked, dim=-1)
    del masked  # a pending value a Var holds is stored by itself (docs/design.md); let go, it fuses
    source = kernel_sources(result)
    if columns >= 64:  # a row long enough for the max pass's four vectors: its loop is vector code
        assert "mj_index_lanes(" in source and "mj_float_vector max_" in source, source
    expected = numpy_softmax(np.where(allowed, scores.astype(np.float64), -np.inf))
    assert_close(result, expected, rtol=2e-6, atol=1e-9)
    assert (result.numpy()[:, ~allowed] == 0).all()  # exactly 0 where masked, not tiny


def test_scaled_dot_product_attention_with_causal_mask(rng):
    query, key, value = (rng.standard_normal((2, 3, 70, 16)).astype(np.float32) for _ in range(3))
    result = F.scaled_dot_product_attention(mj.array(query), mj.array(key), mj.array(value), is_causal=True)
    scores = query.astype(np.float64) @ key.astype(np.float64).swapaxes(-1, -2) / 4.0
    scores = np.where(np.tril(np.ones((70, 70), bool)), scores, -np.inf)
    assert_close(result, numpy_softmax(scores) @ value.astype(np.float64), rtol=1e-4, atol=1e-5)


def test_index_arithmetic_and_comparisons_on_lanes(rng):
    # Subtraction, multiplication, addition, max, negation and the logical ops of int64 aranges, broadcast
    # against each other: all on lanes in an exp kernel (explicit SIMD), rows of 37 (two vectors and a part).
    rows, columns = 19, 37
    x = rng.standard_normal((3, rows, columns)).astype(np.float32)
    i = mj.arange(0, rows, 1, "int64").reshape([rows, 1])
    j = mj.arange(0, columns, 1, "int64").reshape([1, columns])
    mask = (((j - i) * 2 <= 3) & (j + 1 > i)) | (mj.maximum(i, j) == 5) | (-j < -30) | (mj.minimum(i, j) == 7)
    ni, nj = np.arange(rows)[:, None], np.arange(columns)[None, :]
    expected_mask = ((((nj - ni) * 2 <= 3) & (nj + 1 > ni)) | (np.maximum(ni, nj) == 5) | (-nj < -30)
                     | (np.minimum(ni, nj) == 7))
    v = mj.array(x)
    result = mj.where(mask, v.exp(), v * 0.5)
    del mask, i, j  # let go of the pending mask and index values, so they fuse into the kernel
    source = kernel_sources(result)
    assert "mj_index_lanes(" in source and "mj_store_lanes(" in source and "const float in" not in source, source
    x64 = x.astype(np.float64)
    assert_close(result, np.where(expected_mask, np.exp(x64), x64 * 0.5), rtol=2e-6)


@pytest.mark.parametrize("start, step", [(0.0, 1.0), (0.5, 0.37), (-3.0, 0.001)])
def test_arange_values_on_lanes_are_the_scalar_values(rng, start, step):
    # A float32 arange is (float)(start + step * (double)i): on lanes the same double arithmetic, then the same
    # rounding, so the values that reach the output are bit for bit numpy's float64 computation rounded once.
    count = 300
    x = rng.standard_normal(count).astype(np.float32)
    values = mj.arange(start, start + step * count - step / 2, step, "float32")
    result = mj.where(mj.array(x) > 0, values, mj.array(x).exp())
    assert "mj_index_lanes(" in kernel_sources(result)
    exact = (start + step * np.arange(count, dtype=np.float64)).astype(np.float32)
    got = result.numpy()
    np.testing.assert_array_equal(got[x > 0], exact[x > 0])
    assert_close(got[x <= 0], np.exp(x[x <= 0].astype(np.float64)), rtol=2e-6)


def test_sinusoidal_position_table_is_vector_code(rng):
    # sin(position * exp(-0.03 * frequency)): one kernel over [256, 256] whose element loop converts the arange to
    # lanes, then vector exp and sin.
    positions = mj.arange(0, 256, 1, "float32").reshape([256, 1])
    frequencies = (mj.arange(0, 256, 1, "float32") * -0.03).exp().reshape([1, 256])
    table = (positions * frequencies).sin()
    source = kernel_sources(table)
    assert "mj_sin_lanes(" in source and "mj_index_lanes(" in source, source
    f32 = np.float32
    frequency = np.exp((np.arange(256, dtype=f32) * f32(-0.03)).astype(np.float64)).astype(f32)
    angle = (np.arange(256, dtype=f32)[:, None] * frequency[None, :]).astype(np.float64)
    # float32 exp is within 1 ulp, so the angle can differ by 1 ulp of up to 255: compare with that slack
    assert_close(table, np.sin(angle), rtol=0, atol=4e-5)


@pytest.mark.parametrize("target", [["-march=native"], ["-mavx2", "-mfma", "-mno-avx512f"], []],
                         ids=["native", "avx2", "sse"])
def test_index_lanes_at_every_width(tmp_path, target):
    # The JIT only runs the host's width: the int64 lanes of 8 (AVX2) and 4 (SSE) lanes, and partial vectors of
    # them, run here through clang++ on a kernel whose exp is taken where the element's index is past 13 or
    # below 9.
    v = mj.array(np.ones(40, np.float32))
    index = mj.arange(0, 40, 1, "int64")
    kernel = mj.inspect(mj.where((index * 3 > 40) | (index < 9), v.exp(), v * 3.0))[0]
    assert "mj_index_lanes(" in kernel.source, kernel.source
    output = partial_check_output(tmp_path, kernel, target)
    inputs = np.arange(40) * 0.25 - 5.0
    index = np.arange(40)
    inside = ((index >= 3) & (index < 5)) | ((index >= 6) & (index < 35))
    chosen = (index * 3 > 40) | (index < 9)
    expected = np.where(inside, np.where(chosen, np.exp(inputs), inputs * 3.0), -7.0)
    np.testing.assert_allclose(output, expected, rtol=2e-6)
