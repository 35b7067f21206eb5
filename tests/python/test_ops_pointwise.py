"""isnan, isinf, isfinite, nan_to_num, sign, reciprocal and square against numpy (PyTorch's conventions where
they differ: sign(nan) is 0), as functions and Var methods."""
import numpy as np
import pytest

import metajit as mj

SPECIAL = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 3e38], np.float32)


def test_classifiers_match_numpy():
    x = mj.array(SPECIAL)
    np.testing.assert_array_equal(mj.isnan(x).numpy(), np.isnan(SPECIAL))
    np.testing.assert_array_equal(x.isinf().numpy(), np.isinf(SPECIAL))
    np.testing.assert_array_equal(mj.isfinite(x).numpy(), np.isfinite(SPECIAL))


def test_classifiers_of_integers_are_constant():
    x = mj.array(np.arange(4))
    assert not mj.isnan(x).numpy().any() and not mj.isinf(x).numpy().any() and mj.isfinite(x).numpy().all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_nan_to_num_defaults_and_arguments(dtype):
    data = (SPECIAL[:-1] if dtype == np.float16 else SPECIAL).astype(dtype)  # 3e38 is past float16's range
    x = mj.array(data)
    np.testing.assert_array_equal(mj.nan_to_num(x).numpy(), np.nan_to_num(data))
    np.testing.assert_array_equal(x.nan_to_num(nan=-1.0, posinf=9.0, neginf=-9.0).numpy(),
                                  np.nan_to_num(data, nan=-1.0, posinf=9.0, neginf=-9.0))


def test_sign_reciprocal_square(rng):
    x = mj.array(SPECIAL)
    np.testing.assert_array_equal(mj.sign(x).numpy(), np.nan_to_num(np.sign(SPECIAL), nan=0.0))
    data = rng.uniform(0.5, 2.0, 10).astype(np.float32)
    np.testing.assert_allclose(mj.reciprocal(mj.array(data)).numpy(), 1 / data, rtol=1e-6)
    np.testing.assert_allclose(mj.array(data).square().numpy(), data * data, rtol=1e-6)
    assert mj.reciprocal(mj.array(np.array([4]))).dtype == "float32"
    np.testing.assert_array_equal(mj.sign(mj.array(np.array([-3, 0, 5]))).numpy(), [-1, 0, 1])


def test_gradients(rng):
    data = rng.uniform(0.5, 2.0, 6) * np.array([1, -1, 1, -1, 1, -1])
    x = mj.array(data, requires_grad=True)
    gradient = mj.grad((mj.square(x) + mj.reciprocal(x) + mj.sign(x)).sum(), x).numpy()
    np.testing.assert_allclose(gradient, 2 * data - 1 / data ** 2, rtol=1e-12)
