"""Reductions as functions (mj.sum, mj.mean, mj.prod) and the PyTorch-only ones (amax, amin, all, any), against
numpy, with PyTorch's dim forms (int, sequence, None or () for every dim) and gradients."""
import numpy as np
import pytest

import metajit as mj


@pytest.mark.parametrize("dim, axis", [(None, None), (1, 1), ((0, 2), (0, 2)), ([-1], (-1,)), ((), None)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_functions_match_numpy(rng, dim, axis, keepdim):
    data = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x = mj.array(data)
    np.testing.assert_allclose(mj.sum(x, dim, keepdim).numpy(), data.sum(axis=axis, keepdims=keepdim), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(mj.mean(x, dim, keepdim).numpy(), data.mean(axis=axis, keepdims=keepdim),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mj.prod(x, dim, keepdim).numpy(), data.prod(axis=axis, keepdims=keepdim),
                               rtol=1e-4, atol=1e-7)
    np.testing.assert_array_equal(mj.amax(x, dim, keepdim).numpy(), data.max(axis=axis, keepdims=keepdim))
    np.testing.assert_array_equal(x.amin(dim, keepdim).numpy(), data.min(axis=axis, keepdims=keepdim))


def test_sum_of_integers_is_int64_and_dtype_casts_first():
    data = np.array([[100, 100], [100, 100]], dtype=np.int8)
    assert mj.sum(mj.array(data)).dtype == "int64"
    assert int(mj.sum(mj.array(data)).item()) == 400
    assert mj.sum(mj.array(data), dtype=np.float64).dtype == "float64"
    assert mj.mean(mj.array(np.arange(4)), dtype="float64").item() == 1.5


def test_amax_keeps_nan():
    data = np.array([[1.0, np.nan], [3.0, 2.0]], np.float32)
    np.testing.assert_array_equal(mj.amax(mj.array(data), 1).numpy(), [np.nan, 3.0])


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_all_and_any(rng, dim):
    data = rng.integers(0, 2, (6, 5)).astype(np.float32)
    data[0] = 1  # one all-true row, so both answers occur
    x = mj.array(data)
    np.testing.assert_array_equal(mj.all(x, dim).numpy(), data.astype(bool).all(axis=dim))
    np.testing.assert_array_equal(x.any(dim).numpy(), data.astype(bool).any(axis=dim))
    np.testing.assert_array_equal((x > 0.5).all(dim).numpy(), (data > 0.5).all(axis=dim))
    assert mj.all(x, dim).dtype == "bool"


def test_gradient_of_amax_and_mean(rng):
    data = rng.standard_normal((4, 6))
    x = mj.array(data, requires_grad=True)
    gradient = mj.grad(mj.amax(x, 1).sum() + mj.mean(x), x).numpy()
    expected = (data == data.max(axis=1, keepdims=True)) + 1 / data.size
    np.testing.assert_allclose(gradient, expected, rtol=1e-12)


def test_a_repeated_or_out_of_range_dim_is_an_error(rng):
    x = mj.array(rng.standard_normal((2, 3)).astype(np.float32))
    with pytest.raises(ValueError, match="multiple times"):
        mj.sum(x, (1, 1))
    with pytest.raises(IndexError, match="out of range"):
        mj.amax(x, 2)


def test_count_nonzero(rng):
    data = rng.integers(-1, 2, (5, 6))
    np.testing.assert_array_equal(mj.count_nonzero(mj.array(data)).numpy(), np.count_nonzero(data))
    np.testing.assert_array_equal(mj.array(data).count_nonzero((0,)).numpy(), np.count_nonzero(data, axis=0))
    assert mj.count_nonzero(mj.array(data), 1).dtype == "int64"


def test_max_and_min_follow_pytorch_return_types():
    """x.max(dim) is PyTorch's named tuple (values, indices): `_, predicted = logits.max(1)` takes the indices,
    as ported training loops expect (it used to be the values alone, so unpacking two rows went unnoticed)."""
    torch = pytest.importorskip("torch")
    data = np.array([[1.0, 5.0, 5.0, -2.0], [7.0, 0.0, 7.0, np.nan], [0.5, -1.0, 3.0, 2.0]], dtype=np.float32)
    x, t = mj.array(data), torch.tensor(data)
    for op in ("max", "min"):
        for dim in (0, 1, -1):
            for keepdim in (False, True):
                values, indices = getattr(x, op)(dim, keepdim=keepdim)
                expected = getattr(t, op)(dim, keepdim=keepdim)
                np.testing.assert_array_equal(values.numpy(), expected.values.numpy())
                np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())
                named = getattr(mj, op)(x, dim, keepdim)
                np.testing.assert_array_equal(named.indices.numpy(), expected.indices.numpy())
        np.testing.assert_array_equal(getattr(x, op)().numpy(), getattr(t, op)().numpy())
        other = mj.array(data[::-1].copy())
        np.testing.assert_array_equal(getattr(mj, op)(x, other).numpy(),
                                      getattr(torch, op)(t, torch.tensor(data[::-1].copy())).numpy())
    logits = mj.array(np.array([[0.1, 0.9], [0.8, 0.2]], np.float32))
    _, predicted = logits.max(1)
    np.testing.assert_array_equal(predicted.numpy(), [1, 0])
    with pytest.raises(TypeError, match="amax"):
        x.max((0, 1))
