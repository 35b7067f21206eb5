"""Running sums: a sum over r of terms kept only where r <= the last index i (cumsum's triangle, or a user's own
reindex written that way) renders as one pass along each row (jit/cpp_renderer.cc, running_sum), and so does
its gradient, a scatter of every element into the targets r <= i (reverse_running_sum). Results must match
numpy for every length, dtype and dim, and sums whose terms depend on the position must not take those paths."""
import re

import numpy as np
import pytest

import metajit as mj

RUNNING = re.compile(r"const int64_t r\d+ = i\d+;")


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
