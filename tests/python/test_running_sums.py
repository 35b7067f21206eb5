"""Running sums: a sum over r of terms kept only where r <= the last index i (cumsum's triangle, or a user's own
reindex written that way) renders as one pass along each row (jit/codegen/cpp/cpp_renderer.cc, running_sum), and so does
its gradient, a scatter of every element into the targets r <= i (reverse_running_sum). Results must match
numpy for every length, dtype and dim, and sums whose terms depend on the position must not take those paths."""
import re

import numpy as np
import pytest

import metajit as mj
from conftest import VECTOR_TARGETS, cpu_backend, run_kernel_program

# the scalar form (term r = i added to the sum) or the vector form (a vector of terms scanned across its lanes)
RUNNING = re.compile(r"const int64_t r\d+ = i\d+;|mj_prefix_(sum|product)\(")


def running_sum_kernels(var):
    return sum(bool(RUNNING.search(kernel["source"])) for kernel in mj.inspect_kernels(var))


def reverse_running_sum_kernels(var):
    return sum("running_total" in kernel["source"] for kernel in mj.inspect_kernels(var))


@pytest.mark.parametrize("length", [1, 5, 64, 65, 200, 4096])
def test_cumsum_of_every_length_matches_numpy(rng, length):
    data = rng.standard_normal((3, length)).astype(np.float32)
    result = mj.array(data).cumsum(1)
    assert running_sum_kernels(result) >= 1
    np.testing.assert_allclose(result.numpy(), np.cumsum(data.astype(np.float64), axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_along_each_dim_of_a_3d_input(rng, dim):
    data = rng.standard_normal((70, 6, 90)).astype(np.float32)
    result = mj.array(data).cumsum(dim)
    np.testing.assert_allclose(result.numpy(), np.cumsum(data.astype(np.float64), axis=dim), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32, np.uint8])
def test_cumsum_of_other_dtypes(rng, dtype):
    data = (rng.standard_normal((4, 300)) * 20).astype(dtype)
    result = mj.array(data).cumsum(1)
    assert running_sum_kernels(result) >= 1
    expected = np.cumsum(data, axis=1, dtype=np.float64 if dtype == np.float64 else np.int64)
    if dtype == np.float64:
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-12, atol=1e-10)
    else:
        np.testing.assert_array_equal(result.numpy(), expected)


def test_infinities_and_nan_stay_where_numpy_puts_them():
    data = np.ones((2, 150), np.float32)
    data[0, 10] = np.inf
    data[1, 100] = np.nan
    np.testing.assert_array_equal(mj.array(data).cumsum(1).numpy(), np.cumsum(data, axis=1))


def test_a_users_own_triangle_is_a_running_sum(rng):
    data = rng.standard_normal(40).astype(np.float32)
    triangle = mj.reindex(mj.array(data), [40, 40], ["i1"], 0.0, ["i1 > i0"])
    result = triangle.sum(1) * 2.0
    assert running_sum_kernels(result) == 1
    np.testing.assert_allclose(result.numpy(), 2 * np.cumsum(data.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_terms_that_depend_on_the_row_position_are_not_a_running_sum(rng):
    """sum over r <= i of x[(r + i) % n]: each element's terms differ, so no element follows from the last."""
    data = rng.standard_normal(30).astype(np.float32)
    triangle = mj.reindex(mj.array(data), [30, 30], ["(i1 + i0) % 30"], 0.0, ["i1 > i0"])
    result = triangle.sum(1)
    assert running_sum_kernels(result) == 0
    expected = np.array([sum(data[(r + i) % 30] for r in range(i + 1)) for i in range(30)])
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_gradient_of_cumsum(rng):
    data = rng.standard_normal((3, 130)).astype(np.float64)
    weights = rng.standard_normal((3, 130))
    x = mj.array(data, requires_grad=True)
    gradient = mj.grad((x.cumsum(1) * mj.array(weights)).sum(), x)
    assert reverse_running_sum_kernels(gradient) >= 1
    expected = np.cumsum(weights[:, ::-1], axis=1)[:, ::-1]  # the reverse running sum of the weights
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("targets", [25, 40, 60])  # fewer, as many and more targets than elements
def test_a_users_own_reverse_scatter_is_a_running_sum(rng, dtype, targets):
    """y[r] += x[i] for every r <= i: y[r] is the sum of x[r:]."""
    data = (rng.standard_normal(40) * 10).astype(dtype)
    spread = mj.broadcast(mj.array(data), [40, targets], [1])  # element (i, r) holds x[i]
    result = mj.reindex_reduce(spread, "add", [targets], ["i1"], ["i1 > i0"])
    assert reverse_running_sum_kernels(result) == 1
    suffix = np.cumsum(data[::-1].astype(np.float64))[::-1]
    expected = np.concatenate([suffix, np.zeros(max(0, targets - 40))])[:targets]
    np.testing.assert_allclose(result.numpy(), expected.astype(dtype), rtol=1e-5, atol=1e-4)


def test_a_scatter_whose_value_depends_on_the_target_is_not_a_running_sum(rng):
    data = rng.standard_normal((30, 30)).astype(np.float32)  # element (i, r) has its own value
    result = mj.reindex_reduce(mj.array(data), "add", [30], ["i1"], ["i1 > i0"])
    assert reverse_running_sum_kernels(result) == 0
    np.testing.assert_allclose(result.numpy(), np.triu(data.T).sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("length", [1, 7, 64, 65, 300])
def test_cumprod_matches_numpy_and_runs_as_running_products(rng, length):
    data = rng.uniform(0.8, 1.25, (3, length))
    result = mj.array(data).cumprod(1)
    assert running_sum_kernels(result) >= 1
    np.testing.assert_allclose(result.numpy(), np.cumprod(data, axis=1), rtol=1e-12)


def test_cumprod_of_integers_zeros_and_nan_along_any_dim(rng):
    integers = rng.integers(-3, 4, (4, 70))
    np.testing.assert_array_equal(mj.cumprod(mj.array(integers), 1).numpy(), np.cumprod(integers, axis=1))
    data = rng.uniform(0.5, 1.5, (80, 3))
    data[10, 0], data[40, 1], data[5, 2] = 0.0, np.nan, np.inf
    np.testing.assert_allclose(mj.cumprod(mj.array(data), 0).numpy(), np.cumprod(data, axis=0), rtol=1e-12)


def test_cumprod_gradient_is_right_at_zeros(rng):
    torch = pytest.importorskip("torch")
    data = rng.uniform(0.5, 1.5, (3, 100))
    data[1, 20] = 0.0
    data[2, [5, 70]] = 0.0
    weights = rng.standard_normal((3, 100))
    x = mj.array(data, requires_grad=True)
    gradient = mj.grad((x.cumprod(1) * mj.array(weights)).sum(), x).numpy()
    reference = torch.tensor(data, requires_grad=True)
    (reference.cumprod(1) * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(gradient, reference.grad.numpy(), rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------- vector scans (float32)
def vector_scan_kernels(var, helper="mj_prefix_sum("):
    return sum(helper in kernel["source"] for kernel in mj.inspect_kernels(var))


@pytest.mark.parametrize("length", [2, 15, 16, 17, 33, 64])
def test_float32_running_sums_scan_whole_vectors_and_carry_across_them(rng, length):
    """Each vector of terms is scanned across its lanes and offset by the vectors before it; lengths end inside,
    at and just past a vector (16 lanes with AVX-512, 8 with AVX2, 4 otherwise)."""
    data = rng.standard_normal((5, length)).astype(np.float32)
    result = mj.array(data).cumsum(1)
    assert vector_scan_kernels(result) == 1
    np.testing.assert_allclose(result.numpy(), np.cumsum(data.astype(np.float64), axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("length", [7, 40])
def test_float32_cumprod_scans_vectors_with_zeros_and_infinities(rng, length):
    data = rng.uniform(0.8, 1.25, (4, length)).astype(np.float32)
    data[1, length // 2] = 0.0
    data[2, 3] = np.inf
    data[3, 1] = -0.0
    result = mj.array(data).cumprod(1)
    assert vector_scan_kernels(result, "mj_prefix_product(") == 1
    with np.errstate(invalid="ignore"):
        expected = np.cumprod(data.astype(np.float64), axis=1)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-30)
    np.testing.assert_array_equal(np.signbit(result.numpy()), np.signbit(expected))


def test_vector_scan_of_computed_terms_with_work_after_it(rng):
    data = rng.standard_normal((6, 50)).astype(np.float32)
    result = ((mj.array(data) * 0.5).exp().cumsum(1) + 1.0) * 2.0
    kernels = mj.inspect_kernels(result)
    assert len(kernels) == 1 and "mj_prefix_sum(" in kernels[0]["source"] and "mj_exp_lanes(" in kernels[0]["source"]
    expected = (np.cumsum(np.exp(data.astype(np.float64) * 0.5), axis=1) + 1.0) * 2.0
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5)


def test_float64_running_sums_stay_scalar(rng):
    data = rng.standard_normal((3, 40))
    result = mj.array(data).cumsum(1)
    assert running_sum_kernels(result) == 1 and vector_scan_kernels(result) == 0
    np.testing.assert_allclose(result.numpy(), np.cumsum(data, axis=1), rtol=1e-12, atol=1e-12)


SCAN_CHECK = r"""
extern "C" int printf(const char*, ...);
int main() {
  float input[4 * 37], output[4 * 37];
  for (int i = 0; i < 4 * 37; ++i) { input[i] = (float)((i * 7) % 11) - 5.0f; output[i] = -1000.0f; }
  void* buffers[2] = {output, input};
  metajit_kernel(buffers, 1, 3);  // rows 1 and 2 only: rows 0 and 3 stay untouched
  for (int i = 0; i < 4 * 37; ++i) printf("%.9g\n", output[i]);
  return 0;
}
"""


@pytest.mark.parametrize("compiler_name", ["clang++-14", "g++"])
@VECTOR_TARGETS
@cpu_backend
def test_vector_scans_at_every_width_and_with_gcc(tmp_path, compiler_name, target):
    # The JIT only runs the host's width: the 8- and 4-lane scans (and g++, the subprocess fallback) run here.
    kernel = mj.inspect(mj.array(np.ones((4, 37), np.float32)).cumsum(1))[0]
    assert "mj_prefix_sum(" in kernel.source
    output = run_kernel_program(tmp_path, kernel, SCAN_CHECK, compiler_name, target).reshape(4, 37)
    inputs = ((np.arange(4 * 37) * 7) % 11 - 5.0).reshape(4, 37)
    expected = np.cumsum(inputs, axis=1)  # small integers: every order of adding them is exact
    expected[[0, 3]] = -1000.0
    np.testing.assert_array_equal(output, expected)


# ------------------------------------------------------------------------------------------- long scans
@pytest.mark.parametrize("length", [1000, 4096])
def test_long_scan_is_block_totals_their_scan_and_one_pass_over_the_blocks(rng, length):
    """A row longer than 64 is scanned in blocks: the block totals, their running sum, then one kernel that
    scans each block offset by the totals before it (read per block, not summed again per block)."""
    data = rng.standard_normal((8, length)).astype(np.float32)
    result = mj.array(data).cumsum(1)
    kernels = mj.inspect_kernels(result)
    assert len(kernels) == 3
    final = kernels[-1]["source"]
    assert "mj_prefix_sum(" in final and not re.search(r"for \(int64_t r\d", final), final
    np.testing.assert_allclose(result.numpy(), np.cumsum(data.astype(np.float64), axis=1), rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("length", [65, 4093, 8192, 100000])
def test_scans_of_rows_with_and_without_a_block_divisor(rng, length):
    data = rng.standard_normal((3, length)).astype(np.float32)
    result = mj.array(data).cumsum(1)
    assert len(mj.inspect_kernels(result)) <= 5
    expected = np.cumsum(data.astype(np.float64), axis=1)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-4, atol=1e-6 * length)


def test_gradient_of_a_long_cumsum(rng):
    data = rng.standard_normal((2, 1000)).astype(np.float32)
    weights = rng.standard_normal((2, 1000)).astype(np.float32)
    x = mj.array(data, requires_grad=True)
    gradient = mj.grad((x.cumsum(1) * mj.array(weights)).sum(), x)
    expected = np.cumsum(weights[:, ::-1].astype(np.float64), axis=1)[:, ::-1]
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-4, atol=2e-4)


def test_a_running_sum_across_rows_is_its_own_kernel(rng):
    """x[b, k, j] + cumsum(t)[b, k]: the scan is read once per row of x, but it runs along the rows, so computed
    per row it would cost up to k terms each; it is a kernel of its own, one pass."""
    x = rng.standard_normal((4, 50, 30)).astype(np.float32)
    t = rng.standard_normal((4, 50)).astype(np.float32)
    result = mj.array(x) + mj.array(t).cumsum(1).reshape([4, 50, 1])
    kernels = mj.inspect_kernels(result)
    assert len(kernels) == 2
    assert sum(bool(RUNNING.search(kernel["source"])) for kernel in kernels) == 1
    expected = x + np.cumsum(t.astype(np.float64), axis=1)[:, :, None]
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("length", [3, 20])
def test_scan_of_a_term_that_is_the_same_everywhere(length):
    """A scan of a broadcast scalar: its term does not change along the row, so it has no vector of terms."""
    value = mj.array(np.array(1.5, np.float32))
    result = mj.reindex(value, [4, length], []).cumsum(1)
    np.testing.assert_array_equal(result.numpy(), np.cumsum(np.full((4, length), 1.5, np.float32), axis=1))


# ---------------------------------------------------------------------------- scans along an earlier dim
COLUMN_SCAN = re.compile(r"for \(int64_t i\d+ = column_begin; .*\n\s*\{\n\s*const int64_t r\d+ = i\d+;")


def column_scan_kernels(var):
    return sum(bool(COLUMN_SCAN.search(kernel["source"])) for kernel in mj.inspect_kernels(var))


def test_a_users_own_triangle_along_the_next_to_last_dim_is_one_pass_per_column(rng):
    data = rng.standard_normal((3, 40, 50)).astype(np.float32)
    triangle = mj.reindex(mj.array(data), [3, 40, 50, 40], ["i0", "i3", "i2"], 0.0, ["i3 > i1"])
    result = triangle.sum(3) * 2.0
    assert column_scan_kernels(result) == 1 and len(mj.inspect_kernels(result)) == 1
    np.testing.assert_allclose(result.numpy(), 2 * np.cumsum(data.astype(np.float64), axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, dim", [((4096, 256), 0), ((50, 20), 0), ((5, 200, 20), 1), ((4, 1000, 33), 1),
                                        ((70, 6, 90), 0), ((8, 65, 16, 2), 1)])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scans_along_an_earlier_dim_walk_it_in_place(rng, shape, dim, op):
    """With at least 16 elements after the scanned dim, the input is viewed as [outer, n, inner] and scanned
    along n with a tile of columns at a time (no transposes); the values match numpy's."""
    data = rng.uniform(0.9, 1.1, shape) if op == "cumprod" else rng.standard_normal(shape)
    data = data.astype(np.float32)
    result = getattr(mj, op)(mj.array(data), dim)
    assert column_scan_kernels(result) >= 1
    expected = getattr(np, op)(data.astype(np.float64), axis=dim)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-4, atol=1e-6 * shape[dim])


def test_column_scans_of_integers_and_special_values(rng):
    integers = rng.integers(-50, 50, (300, 40))
    np.testing.assert_array_equal(mj.array(integers).cumsum(0).numpy(), np.cumsum(integers, axis=0))
    data = np.ones((120, 20), np.float32)
    data[10, 3], data[100, 5], data[50, 7] = np.inf, np.nan, -np.inf
    np.testing.assert_array_equal(mj.array(data).cumsum(0).numpy(), np.cumsum(data, axis=0))


def test_gradient_of_a_scan_along_an_earlier_dim(rng):
    data = rng.standard_normal((130, 24))
    weights = rng.standard_normal((130, 24))
    x = mj.array(data, requires_grad=True)
    gradient = mj.grad((x.cumsum(0) * mj.array(weights)).sum(), x)
    expected = np.cumsum(weights[::-1], axis=0)[::-1]
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-10, atol=1e-10)
