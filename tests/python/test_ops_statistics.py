"""var, std, var_mean and std_mean against numpy (float64 references, ddof = correction), their arguments in
PyTorch's forms, gradients, and errors."""
import numpy as np
import pytest

import metajit as mj


@pytest.mark.parametrize("dim, keepdim", [(None, False), (1, False), ((0, 2), True), ([-1], False), ([], False)])
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_and_std_match_numpy(rng, dim, keepdim, correction):
    data = rng.standard_normal((4, 5, 6)).astype(np.float32) * 3 + 1
    axis = None if dim is None or dim == [] else dim if isinstance(dim, int) else tuple(dim)
    expected = data.astype(np.float64).var(axis=axis, ddof=correction, keepdims=keepdim)
    x = mj.array(data)
    variance = mj.var(x, dim, keepdim=keepdim, correction=correction)
    np.testing.assert_allclose(variance.numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.std(dim, keepdim=keepdim, correction=correction).numpy(), np.sqrt(expected),
                               rtol=1e-5, atol=1e-6)


def test_large_mean_keeps_the_spread():
    """sum(x^2) - sum(x)^2 / n would lose every digit here; two passes keep them."""
    data = (np.arange(1000, dtype=np.float32) % 7 + 1e4).astype(np.float32)
    np.testing.assert_allclose(mj.var(mj.array(data)).numpy(), data.astype(np.float64).var(ddof=1), rtol=1e-4)


def test_unbiased_and_the_legacy_bool_overload(rng):
    data = rng.standard_normal((7, 3)).astype(np.float32)
    x = mj.array(data)
    np.testing.assert_allclose(mj.var(x, 0, unbiased=False).numpy(), data.var(axis=0), rtol=1e-5)
    np.testing.assert_allclose(mj.var(x, False).numpy(), data.var(), rtol=1e-5)  # var(input, unbiased)
    np.testing.assert_allclose(mj.std(x, True).numpy(), data.std(ddof=1), rtol=1e-5)
    with pytest.raises(ValueError, match="either unbiased= or correction="):
        mj.var(x, 0, unbiased=True, correction=1)


def test_var_mean_and_std_mean_return_both(rng):
    data = rng.standard_normal((5, 8)).astype(np.float32)
    variance, mean = mj.var_mean(mj.array(data), 1)
    np.testing.assert_allclose(variance.numpy(), data.astype(np.float64).var(axis=1, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(mean.numpy(), data.mean(axis=1), rtol=1e-5, atol=1e-6)
    deviation, mean = mj.std_mean(mj.array(data), 0, keepdim=True, correction=0)
    assert tuple(deviation.shape) == (1, 8) and tuple(mean.shape) == (1, 8)
    np.testing.assert_allclose(deviation.numpy(), data.std(axis=0, keepdims=True), rtol=1e-5)


def test_gradient_of_std(rng):
    data = rng.standard_normal((6, 4)).astype(np.float64)
    x = mj.array(data, requires_grad=True)
    gradient = mj.grad(mj.std(x, 0).sum(), x).numpy()
    deviation = data - data.mean(axis=0)
    expected = deviation / ((data.shape[0] - 1) * data.std(axis=0, ddof=1))
    np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-9)


def test_no_degrees_of_freedom_warns_and_gives_nan():
    with pytest.warns(UserWarning, match="no degrees of freedom"):
        result = mj.var(mj.array(np.ones(1, np.float32)))
    assert np.isnan(result.numpy())


def test_integer_input_is_a_clear_error():
    with pytest.raises(TypeError, match="floating-point"):
        mj.var(mj.array(np.arange(4)))
