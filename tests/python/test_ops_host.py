"""nonzero, masked_select, unique and allclose (finished on the host, like boolean-mask indexing), and the random
integers and coin flips of randint / bernoulli, against numpy."""
import numpy as np
import pytest

import metajit as mj


def test_nonzero_both_forms(rng):
    data = rng.integers(-1, 2, (4, 5))
    np.testing.assert_array_equal(mj.nonzero(mj.array(data)).numpy(), np.argwhere(data))
    for ours, expected in zip(mj.array(data).nonzero(as_tuple=True), np.nonzero(data)):
        np.testing.assert_array_equal(ours.numpy(), expected)
    assert mj.nonzero(mj.array(data)).dtype == "int64"


def test_masked_select_broadcasts_and_keeps_the_gradient(rng):
    data = rng.standard_normal((3, 4))
    mask = np.array([True, False, True, True])
    x = mj.array(data, requires_grad=True)
    selected = mj.masked_select(x, mj.array(mask))
    np.testing.assert_array_equal(selected.numpy(), data[:, mask].ravel())
    np.testing.assert_array_equal(mj.grad(selected.sum(), x).numpy(), np.broadcast_to(mask, (3, 4)).astype(float))
    with pytest.raises(TypeError, match="must be bool"):
        mj.masked_select(x, mj.array(np.ones(4)))


def test_unique_with_inverse_and_counts(rng):
    data = rng.integers(0, 5, (3, 6))
    values, inverse, counts = mj.unique(mj.array(data), return_inverse=True, return_counts=True)
    expected = np.unique(data, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), expected[0])
    np.testing.assert_array_equal(inverse.numpy(), expected[1].reshape(data.shape))
    np.testing.assert_array_equal(counts.numpy(), expected[2])
    rows = np.array([[1, 2], [1, 2], [0, 5]])
    np.testing.assert_array_equal(mj.array(rows).unique(dim=0).numpy(), np.unique(rows, axis=0))


def test_allclose_is_a_python_bool(rng):
    data = rng.standard_normal(5)
    assert mj.allclose(mj.array(data), data + 1e-9) is True
    assert mj.array(data).allclose(mj.array(data + 1e-3)) is False
    nan = np.array([np.nan])
    assert not mj.allclose(mj.array(nan), nan) and mj.allclose(mj.array(nan), nan, equal_nan=True)


def test_randint_range_dtype_and_seed():
    mj.seed(7)
    first = mj.randint(-3, 4, (2000,)).numpy()
    mj.seed(7)
    again = mj.randint(-3, 4, [2000]).numpy()
    np.testing.assert_array_equal(first, again)
    assert first.dtype == np.int64 and first.min() == -3 and first.max() == 3
    assert set(np.unique(mj.randint(2, (500,)).numpy())) == {0, 1}
    with pytest.raises(ValueError, match="greater than low"):
        mj.randint(5, 5, (3,))


def test_bernoulli_frequency():
    mj.seed(3)
    draws = mj.bernoulli(mj.full([20000], 0.25)).numpy()
    assert set(np.unique(draws)) <= {0.0, 1.0}
    assert abs(draws.mean() - 0.25) < 0.02  # 6 standard deviations of the mean
    assert mj.bernoulli(mj.zeros(10), p=1.0).numpy().sum() == 10
