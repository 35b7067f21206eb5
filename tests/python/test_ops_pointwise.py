"""isnan, isinf, isfinite, nan_to_num, sign, reciprocal and square against numpy (PyTorch's conventions where
they differ: sign(nan) is 0), as functions and Var methods."""
import numpy as np
import pytest

import metajit as mj
from gradient_check import check_gradients

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


EDGES = np.array([1.0, -1.0, 0.0, -0.0, 3.0, -2.0, 1e-3, 5.0, np.inf, -np.inf, np.nan], np.float32)


def test_atan2_matches_numpy_in_every_quadrant_with_zeros_and_infinities():
    y, x = (grid.ravel() for grid in np.meshgrid(EDGES, EDGES))
    np.testing.assert_allclose(mj.atan2(mj.array(y), mj.array(x)).numpy(), np.arctan2(y, x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(mj.array(y).arctan2(mj.array(x)).numpy(), np.arctan2(y, x), rtol=1e-6, atol=1e-7)


def test_atan2_gradient(rng):
    check_gradients(mj.atan2, rng.standard_normal(8), rng.standard_normal(8))


def test_trunc_frac_fmod_remainder(rng):
    data = (rng.standard_normal(50) * 10).astype(np.float32)
    np.testing.assert_array_equal(mj.trunc(mj.array(data)).numpy(), np.trunc(data))
    np.testing.assert_allclose(mj.array(data).frac().numpy(), data - np.trunc(data), rtol=1e-6)
    divisors = np.where(np.arange(50) % 2, 3.0, -2.5).astype(np.float32)
    np.testing.assert_array_equal(mj.fmod(mj.array(data), mj.array(divisors)).numpy(), np.fmod(data, divisors))
    np.testing.assert_array_equal(mj.remainder(mj.array(data), 3.0).numpy(), np.remainder(data, np.float32(3.0)))
    integers = np.arange(-7, 8)
    np.testing.assert_array_equal(mj.fmod(mj.array(integers), 3).numpy(), np.fmod(integers, 3))


def test_hypot_logaddexp_lerp_addcmul_addcdiv(rng):
    a, b = (rng.standard_normal(20) * 5).astype(np.float32), (rng.standard_normal(20) * 5).astype(np.float32)
    np.testing.assert_allclose(mj.hypot(mj.array(a), mj.array(b)).numpy(), np.hypot(a, b), rtol=1e-6)
    assert np.isfinite(mj.hypot(mj.array(np.float32(3e30)), 4e30).item())
    np.testing.assert_allclose(mj.logaddexp(mj.array(a), mj.array(b)).numpy(), np.logaddexp(a, b), rtol=1e-6)
    extremes = np.array([1000.0, -np.inf, np.inf], np.float32)
    np.testing.assert_array_equal(mj.logaddexp(mj.array(extremes), mj.array(extremes)).numpy(),
                                  np.logaddexp(extremes, extremes))
    np.testing.assert_allclose(mj.lerp(mj.array(a), mj.array(b), 0.25).numpy(), a + 0.25 * (b - a), rtol=1e-6)
    c = rng.uniform(1, 2, 20).astype(np.float32)
    np.testing.assert_allclose(mj.addcmul(mj.array(a), mj.array(b), mj.array(c), value=0.5).numpy(),
                               a + 0.5 * b * c, rtol=1e-6)
    np.testing.assert_allclose(mj.array(a).addcdiv(mj.array(b), mj.array(c), value=2).numpy(), a + 2 * b / c,
                               rtol=1e-6)


def test_clamp_min_and_max():
    x = mj.array(EDGES)
    np.testing.assert_array_equal(mj.clamp_min(x, 0.5).numpy(), np.where(np.isnan(EDGES), np.nan,
                                                                          np.maximum(EDGES, 0.5)))
    np.testing.assert_array_equal(x.clamp_max(0.5).numpy(), np.where(np.isnan(EDGES), np.nan,
                                                                     np.minimum(EDGES, 0.5)))


def test_comparison_names_and_exp2(rng):
    a, b = rng.integers(0, 3, 10), rng.integers(0, 3, 10)
    x, y = mj.array(a), mj.array(b)
    for name, expected in (("eq", a == b), ("ne", a != b), ("lt", a < b), ("le", a <= b), ("gt", a > b),
                           ("ge", a >= b)):
        np.testing.assert_array_equal(getattr(mj, name)(x, y).numpy(), expected)
        np.testing.assert_array_equal(getattr(x, name)(y).numpy(), expected)
    np.testing.assert_array_equal(mj.exp2(mj.array(np.array([-2.0, 0.0, 3.0, 10.0], np.float32))).numpy(),
                                  [0.25, 1.0, 8.0, 1024.0])
    check_gradients(mj.exp2, rng.standard_normal(5))
