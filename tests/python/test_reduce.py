"""Reindex-reduce meta-op family: sum/mean/max/min/prod over int, tuple, negative and None dims with keepdim,
mj.reduce by name, reduction dtypes, and the general reindex_reduce (scatter-add with duplicate indices via an extra
input, 2x2 max pooling), each against numpy."""
import re

import numpy as np
import pytest

import metajit as mj
from conftest import assert_close

REDUCTIONS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}
DIMS = [None, 0, 1, -1, 2, (0, 2), (-1, 0), (0, 1, 2), [1]]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=repr)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions_match_numpy(name, dim, keepdim, rng):
    data = rng.uniform(0.5, 1.5, size=(3, 4, 5)).astype(np.float32)
    method = {"max": "amax", "min": "amin"}.get(name, name)  # x.max(dim) is (values, indices), as in PyTorch
    result = getattr(mj.array(data), method)(dim, keepdim=keepdim)
    axis = tuple(dim) if isinstance(dim, list) else dim
    expected = REDUCTIONS[name](data.astype(np.float64), axis=axis, keepdims=keepdim).astype(np.float32)
    assert result.dtype == "float32"
    assert_close(result, expected, rtol=1e-6)


@pytest.mark.parametrize("dtype,expected_sum_dtype", [
    ("int8", "int64"), ("uint8", "int64"), ("int32", "int64"), ("int64", "int64"), ("bool", "int64"),
    ("float16", "float16"), ("float64", "float64"),
])
def test_reduction_dtypes_follow_pytorch(dtype, expected_sum_dtype, rng):
    data = (rng.integers(0, 100, size=(4, 30)) if dtype != "bool" else rng.random((4, 30)) < 0.5).astype(dtype)
    x = mj.array(data)
    total = x.sum(1)
    assert total.dtype == expected_sum_dtype
    assert_close(total, data.astype(np.float64).sum(1).astype(expected_sum_dtype), rtol=1e-3)
    assert x.amax(1).dtype == dtype
    assert_close(x.amax(1), data.max(1), rtol=0)
    assert_close(x.amin(0), data.min(0), rtol=0)
    mean = x.mean(1)
    assert mean.dtype == (dtype if dtype in ("float16", "float64") else "float32")
    assert_close(mean, data.astype(np.float64).mean(1), rtol=1e-3)


def test_integer_product_counts_in_int64(rng):
    data = rng.integers(1, 9, size=(3, 12)).astype(np.int32)
    result = mj.array(data).prod(1)
    assert result.dtype == "int64"
    assert_close(result, data.astype(np.int64).prod(1))


def test_reduce_by_name(rng):
    data = rng.standard_normal((4, 5, 6)).astype(np.float32)
    x = mj.array(data)
    assert_close(mj.reduce(x, "add", [0, 2]), data.sum((0, 2)), rtol=1e-5, atol=1e-6)
    assert_close(mj.reduce(x, "max", 1, keepdim=True), data.max(1, keepdims=True), rtol=0)
    assert_close(mj.reduce(x, "minimum"), data.min(), rtol=0)
    assert_close(mj.reduce(x, "mul", -1), data.astype(np.float64).prod(-1), rtol=1e-5)
    flags = data > 0
    assert_close(mj.reduce(mj.array(flags), "and", 1), flags.all(1))
    assert_close(mj.reduce(mj.array(flags), "or", [1, 2]), flags.any((1, 2)))
    assert_close(mj.reduce(x > 0, "or", 1), flags.any(1))


def test_large_sum_accuracy(rng):
    data = rng.uniform(0, 1, size=(1 << 20,)).astype(np.float32)
    assert_close(mj.array(data).sum(), data.astype(np.float64).sum(), rtol=1e-5)
    rows = data.reshape(256, 4096)
    assert_close(mj.array(rows).sum(1), rows.astype(np.float64).sum(1), rtol=1e-5)
    assert_close(mj.array(rows).sum(0), rows.astype(np.float64).sum(0), rtol=1e-5)


def test_max_min_with_nan_and_inf():
    data = np.array([[1.0, np.nan, 3.0], [-np.inf, 0.0, 2.0], [np.inf, -1.0, 5.0]], dtype=np.float32)
    assert_close(mj.array(data).amax(1), data.max(1), equal_nan=True)
    assert_close(mj.array(data).amin(0), data.min(0), equal_nan=True)


def test_reduction_of_reduction_and_of_views(rng):
    data = rng.standard_normal((6, 7, 8)).astype(np.float32)
    x = mj.array(data)
    assert_close(x.sum(2).amax(0), data.sum(2).max(0), rtol=1e-5, atol=1e-6)
    assert_close(x.T.sum(0), data.T.sum(0), rtol=1e-5, atol=1e-6)
    assert_close(x[::2, 1:].amin((0, 1)), data[::2, 1:].min((0, 1)), rtol=0)
    assert_close((x - x.mean(-1, keepdim=True)).sum(-1), np.zeros((6, 7)), atol=1e-5)


def test_reduction_over_empty_dims_gives_identity():
    empty = np.zeros((3, 0), dtype=np.float32)
    assert_close(mj.array(empty).sum(1), np.zeros(3, np.float32))
    assert_close(mj.array(empty).prod(1), np.ones(3, np.float32))
    assert_close(mj.array(empty).amax(1), np.full(3, -np.inf, np.float32))
    assert_close(mj.array(empty).sum(0), np.zeros(0, np.float32))


# ---------------------------------------------------------------------------------------------------- reindex_reduce
def test_scatter_add_with_duplicate_indices(rng):
    values = rng.standard_normal((10, 3)).astype(np.float32)
    targets = np.array([0, 4, 4, 2, 0, 0, 5, 4, 1, 0], dtype=np.int64)
    result = mj.reindex_reduce(mj.array(values), "add", [6, 3], ["@e0(i0)", "i1"], extras=[mj.array(targets)])
    expected = np.zeros((6, 3), np.float64)
    np.add.at(expected, targets, values.astype(np.float64))
    assert_close(result, expected, rtol=1e-6, atol=1e-6)


def test_scatter_max_and_out_of_range_targets_are_skipped(rng):
    values = rng.standard_normal(12).astype(np.float32)
    targets = np.array([1, 1, 3, -1, 0, 3, 9, 1, 0, 2, 2, 4], dtype=np.int32)
    result = mj.reindex_reduce(mj.array(values), "max", [4], ["@e0(i0)"], extras=[mj.array(targets)])
    expected = np.full(4, -np.inf, np.float32)
    valid = (targets >= 0) & (targets < 4)
    np.maximum.at(expected, targets[valid], values[valid])
    assert_close(result, expected, rtol=0)


def test_max_pool_2x2(rng):
    data = rng.standard_normal((2, 3, 8, 6)).astype(np.float32)
    result = mj.reindex_reduce(mj.array(data), "max", [2, 3, 4, 3], ["i0", "i1", "i2/2", "i3/2"])
    assert_close(result, data.reshape(2, 3, 4, 2, 3, 2).max((3, 5)), rtol=0)


def test_reindex_reduce_with_overflow_condition_and_computed_input(rng):
    data = rng.standard_normal((5, 5)).astype(np.float32)
    # sum of the strictly upper triangle of exp(x), per row
    result = mj.reindex_reduce(mj.array(data).exp(), "add", [5], ["i0"], overflow_conditions=["i1 <= i0"])
    assert_close(result, np.triu(np.exp(data.astype(np.float64)), 1).sum(1), rtol=1e-6)


def test_average_pool_as_reindex_reduce_then_elementwise(rng):
    data = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    pooled = mj.reindex_reduce(mj.array(data), "add", [1, 2, 3, 3], ["i0", "i1", "i2/2", "i3/2"]) / 4
    assert_close(pooled, data.reshape(1, 2, 3, 2, 3, 2).mean((3, 5)), rtol=1e-6, atol=1e-7)


SCATTER_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
SCATTER_IDENTITY = {"add": 0, "mul": 1, "max": -np.inf, "min": np.inf}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
@pytest.mark.parametrize("op", list(SCATTER_UFUNCS))
def test_reindex_reduce_ops_and_dtypes(op, dtype, rng):
    values = (rng.uniform(0.5, 1.5, 40) * (3 if "int" in dtype else 1)).astype(dtype)
    targets = rng.integers(0, 6, 40).astype(np.int32)
    result = mj.reindex_reduce(mj.array(values), op, [7], ["@e0(i0)"], extras=[mj.array(targets)])
    expected_dtype = "int64" if op in ("add", "mul") and "int" in dtype else dtype
    identity = SCATTER_IDENTITY[op]
    if "int" in expected_dtype and op in ("max", "min"):
        info = np.iinfo(expected_dtype)
        identity = info.min if op == "max" else info.max
    expected = np.full(7, identity, dtype=np.float64 if "float" in dtype else expected_dtype)
    SCATTER_UFUNCS[op].at(expected, targets, values.astype(expected.dtype))
    assert result.dtype == expected_dtype
    assert_close(result, expected.astype(expected_dtype), rtol=2e-3 if dtype == "float16" else 1e-5)


def test_reindex_reduce_logical_ops():
    values = np.array([True, False, True, True, False, False])
    targets = np.array([0, 0, 1, 1, 2, 2], dtype=np.int64)
    extras = [mj.array(targets)]
    assert_close(mj.reindex_reduce(mj.array(values), "and", [3], ["@e0(i0)"], extras=extras), [False, True, False])
    assert_close(mj.reindex_reduce(mj.array(values), "or", [3], ["@e0(i0)"], extras=extras), [True, True, False])


def test_results_of_scatter_feed_further_ops(rng):
    values = rng.standard_normal((12, 4)).astype(np.float32)
    targets = rng.integers(0, 5, 12).astype(np.int64)
    scattered = mj.reindex_reduce(mj.array(values), "add", [5, 4], ["@e0(i0)", "i1"], extras=[mj.array(targets)])
    expected = np.zeros((5, 4))
    np.add.at(expected, targets, values.astype(np.float64))
    assert_close((scattered * 2).sum(1).exp(), np.exp((expected * 2).sum(1)), rtol=1e-5)
    assert_close(scattered.T[::-1] + 1, expected.T[::-1] + 1, rtol=1e-5, atol=1e-6)


def test_reduction_of_broadcast_and_reductions_feeding_broadcasts(rng):
    row = rng.standard_normal(4).astype(np.float32)
    matrix = rng.standard_normal((5, 4)).astype(np.float32)
    assert_close(mj.array(row).broadcast_to(5, 4).sum(0), row.astype(np.float64) * 5, rtol=1e-5)
    x = mj.array(matrix)
    normalised = x / x.sum(1, keepdim=True) * x.amax(0, keepdim=True)
    assert_close(normalised, matrix / matrix.sum(1, keepdims=True) * matrix.max(0, keepdims=True), rtol=1e-5)
    assert_close(x.sum(0) + x.sum(1).sum(), matrix.sum(0) + matrix.sum(), rtol=1e-5, atol=1e-5)


def test_integer_max_min_extremes():
    data = np.array([[-5, -9, -2], [np.iinfo(np.int64).min, -1, -3]], dtype=np.int64)
    assert_close(mj.array(data).amax(1), data.max(1))
    assert_close(mj.array(data).min(), data.min())
    small = np.array([[200, 3, 255], [0, 17, 9]], dtype=np.uint8)
    assert_close(mj.array(small).amin(1), small.min(1), dtype="uint8")
    assert_close(mj.array(small).amax(0), small.max(0), dtype="uint8")
    assert_close(mj.array(small).sum(1), small.astype(np.int64).sum(1), dtype="int64")


@pytest.mark.parametrize("size", [1 << 20, 3 * (1 << 20) + 1], ids=["split_into_chunks", "prime_to_chunk_counts"])
def test_full_reductions_of_large_tensors(size, rng):
    data = rng.uniform(-1, 1, size).astype(np.float32)
    x = mj.array(data)
    assert_close(x.sum(), data.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
    assert_close(x.max(), data.max(), rtol=0)
    assert_close(x.amin(keepdim=True), data.min(keepdims=True), rtol=0)
    assert_close(x.reshape(1, -1).mean(1, keepdim=True), data.astype(np.float64).mean().reshape(1, 1), atol=1e-6)
    assert_close(mj.reduce(x > -0.999999, "and"), (data > -0.999999).all())
    assert_close(mj.reduce(x > 0.999999, "or"), (data > 0.999999).any())
    integers = rng.integers(-2 ** 30, 2 ** 30, size).astype(np.int32)
    assert_close(mj.array(integers).sum(), integers.astype(np.int64).sum(), dtype="int64")
    factors = np.ones(size, np.float32)
    factors[rng.choice(size, 15, replace=False)] = [2.0] * 10 + [0.5] * 5  # exact in float32: product 32
    assert_close(mj.array(factors).prod(), np.float32(32), rtol=0)


@pytest.mark.parametrize("shape,dims", [
    ((6, 7, 1030), (0, 1)),   # more columns than one tile (1024): two tiles, the second partial
    ((300, 5), (0,)),         # few columns
    ((4, 50, 33), (1,)),      # a middle dim: a column sum for each outer index
    ((3, 2, 4, 40), (0, 2)),  # reduced dims on both sides of a kept one
], ids=str)
def test_column_sums_match_numpy(shape, dims, rng):
    """Sums over outer dims run as column sums (the reduction loops outside, a tile of columns side by side):
    the same values, for every split of the columns between threads."""
    data = rng.uniform(-1, 1, size=shape).astype(np.float32)
    x = mj.array(data)
    assert_close(x.sum(list(dims)), data.astype(np.float64).sum(dims), rtol=1e-5, atol=1e-5)
    assert_close(x.mean(list(dims), keepdim=True), data.astype(np.float64).mean(dims, keepdims=True), rtol=1e-5,
                 atol=1e-6)
    doubles = rng.uniform(-1, 1, size=shape)
    assert_close(mj.array(doubles).sum(list(dims)), doubles.sum(dims), rtol=1e-12, atol=1e-12)


def test_column_sum_of_computed_terms_and_its_kernel(rng):
    """A layer-norm weight gradient: sum over rows of dy * (x - mean_row) * rstd_row. Its kernel is a column sum
    (accumulators per column, the row loop outside); a sum over the last dim stays a row loop."""
    dy, x = (rng.standard_normal((96, 256)).astype(np.float32) for _ in range(2))
    mean = x.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    a, b, m, r = (mj.array(v) for v in (dy, x, mean, rstd))
    gradient = (a * ((b - m) * r)).sum(0)
    kernel, = mj.inspect(gradient, device="cpu")
    assert "sum_0_columns[" in kernel.source, kernel.source
    expected = (dy.astype(np.float64) * ((x - mean) * rstd)).sum(0)
    assert_close(gradient, expected, rtol=1e-4, atol=1e-4)
    row_kernel, = mj.inspect(b.sum(1), device="cpu")
    assert "_columns[" not in row_kernel.source, row_kernel.source


def test_column_sum_added_to_a_loaded_value_is_a_column_sum(rng):
    """An accumulated bias gradient, grad + dy.sum(0): the load of grad comes before the sum in the kernel, and is
    evaluated after it with the rest of the element-wise work (the kernel walked each column down memory, 6.1
    against 0.16 ms at [2048, 1024]). A value the sum itself reads keeps the plain kernel."""
    dy = rng.standard_normal((70, 1030)).astype(np.float32)
    grad = rng.standard_normal(1030).astype(np.float32)
    x, g = mj.array(dy), mj.array(grad)
    accumulated = g + x.sum(0) * 0.5
    kernel, = mj.inspect(accumulated, device="cpu")
    assert re.search(r"sum_\d+_columns\[", kernel.source), kernel.source
    assert_close(accumulated, grad + dy.astype(np.float64).sum(0) * 0.5, rtol=1e-5, atol=1e-5)
    scaled = (x * g).sum(0) + g  # the sum reads g itself
    assert_close(scaled, (dy.astype(np.float64) * grad).sum(0) + grad, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape,dims", [((300, 1030), (0,)), ((4, 50, 33), (1,)), ((3, 2, 4, 40), (0, 2))], ids=str)
def test_column_max_min_and_argmax_match_numpy(shape, dims, rng):
    """Max and min over outer dims are column reductions too (a max over dim 0 walked each column down memory,
    one cache line per term), NaN-propagating; integer ones as well (argmax over dim 0 takes a column min of
    the positions that hold the max)."""
    data = rng.standard_normal(shape).astype(np.float32)
    data.flat[rng.choice(data.size, 3, replace=False)] = [np.nan, np.inf, -np.inf]
    x = mj.array(data)
    for name in ("max", "min"):
        result = getattr(x, "a" + name)(list(dims))
        assert any("_columns[" in kernel.source for kernel in mj.inspect(result, device="cpu"))
        np.testing.assert_array_equal(result.numpy(), getattr(np, name)(data, axis=dims))
    integers = rng.integers(-1000, 1000, shape)
    np.testing.assert_array_equal(mj.array(integers).amax(list(dims)).numpy(), integers.max(axis=dims))
    np.testing.assert_array_equal(mj.array(integers).amin(list(dims)).numpy(), integers.min(axis=dims))
    if len(dims) == 1:
        clean = rng.standard_normal(shape).astype(np.float32)
        clean[(0,) * len(shape)] = clean.max()  # a tie: the first position wins
        np.testing.assert_array_equal(mj.array(clean).argmax(dims[0]).numpy(), clean.argmax(axis=dims[0]))


def test_softmax_over_dim_0_is_column_reductions(rng):
    data = (rng.standard_normal((500, 70)) * 3).astype(np.float32)
    result = mj.nn.functional.softmax(mj.array(data), 0)
    assert sum("_columns[" in kernel.source for kernel in mj.inspect(result, device="cpu")) == 2  # the max and the sum
    shifted = data.astype(np.float64) - data.max(0, keepdims=True)
    np.testing.assert_allclose(result.numpy(), np.exp(shifted) / np.exp(shifted).sum(0, keepdims=True), rtol=1e-5,
                               atol=1e-8)


@pytest.mark.parametrize("values", [[2.0, 0.0, 3.0], [2.0, 0.0, 0.0], [2.0, 4.0, 3.0], [0.0], [-1.5, 0.0, 2.0, 4.0]])
def test_product_gradient_is_the_product_of_the_others_even_at_zeros(values):
    """prod / x is undefined at 0; the gradient is the product of the other elements there (PyTorch's too)."""
    data = np.array(values)
    x = mj.array(data, requires_grad=True)
    expected = np.array([np.prod(np.delete(data, index)) for index in range(data.size)])
    np.testing.assert_array_equal(mj.grad(x.prod(), x).numpy(), expected)


def test_product_gradient_along_a_dim_with_zeros(rng):
    data = rng.uniform(0.5, 2.0, (4, 5))
    data[0, 1] = 0.0
    data[2, [0, 3]] = 0.0
    x = mj.array(data, requires_grad=True)
    weights = rng.standard_normal(4)
    gradient = mj.grad((x.prod(1) * mj.array(weights)).sum(), x).numpy()
    expected = np.array([[weights[row] * np.prod(np.delete(data[row], column)) for column in range(5)]
                         for row in range(4)])
    np.testing.assert_allclose(gradient, expected, rtol=1e-12)
