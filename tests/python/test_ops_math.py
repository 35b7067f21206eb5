"""The libm unary functions log1p, expm1, log2, log10, erf, tan, asin, acos, atan, sinh and cosh: values against
numpy (math.erf for erf) in float32 and float64, gradients against finite differences, integer inputs promoted
to float32, and accuracy where the naive forms lose it (log1p and expm1 near 0, log2 of powers of two)."""
import math

import numpy as np
import pytest

import metajit as mj
from gradient_check import check_gradients

FUNCTIONS = {  # name: (numpy reference, (low, high) of a domain well inside where it is finite)
    "log1p": (np.log1p, (-0.9, 3.0)),
    "expm1": (np.expm1, (-3.0, 3.0)),
    "log2": (np.log2, (0.1, 10.0)),
    "log10": (np.log10, (0.1, 10.0)),
    "erf": (np.vectorize(math.erf), (-3.0, 3.0)),
    "tan": (np.tan, (-1.4, 1.4)),
    "asin": (np.arcsin, (-0.95, 0.95)),
    "acos": (np.arccos, (-0.95, 0.95)),
    "atan": (np.arctan, (-5.0, 5.0)),
    "sinh": (np.sinh, (-3.0, 3.0)),
    "cosh": (np.cosh, (-3.0, 3.0)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-6), (np.float64, 1e-14)])
def test_values_match_numpy(rng, name, dtype, rtol):
    reference, (low, high) = FUNCTIONS[name]
    data = rng.uniform(low, high, 200).astype(dtype)
    expected = reference(data.astype(np.float64))
    function = getattr(mj, name)
    result = function(mj.array(data))
    assert result.dtype == np.dtype(dtype).name
    np.testing.assert_allclose(result.numpy(), expected, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(getattr(mj.array(data), name)().numpy(), expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_gradients_match_finite_differences(rng, name):
    low, high = FUNCTIONS[name][1]
    check_gradients(getattr(mj, name), rng.uniform(low, high, (3, 4)), rtol=1e-5, atol=1e-7)


def test_accuracy_where_the_naive_forms_lose_it():
    tiny = np.array([1e-10, -1e-12, 3e-8], np.float32)
    np.testing.assert_allclose(mj.log1p(mj.array(tiny)).numpy(), np.log1p(tiny.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(mj.expm1(mj.array(tiny)).numpy(), np.expm1(tiny.astype(np.float64)), rtol=1e-6)
    powers = np.array([1, 2, 8, 1024, 0.125], np.float32)
    np.testing.assert_array_equal(mj.log2(mj.array(powers)).numpy(), [0, 1, 3, 10, -3])
    np.testing.assert_array_equal(mj.log10(mj.array(np.array([1, 10, 1000], np.float32))).numpy(), [0, 1, 3])


def test_integer_inputs_give_float32_and_fuse(rng):
    result = mj.atan(mj.array(np.arange(-3, 4)))
    assert result.dtype == "float32"
    np.testing.assert_allclose(result.numpy(), np.arctan(np.arange(-3, 4)), rtol=1e-6)
    data = rng.uniform(0.1, 1.0, 64).astype(np.float32)
    x = mj.array(data)
    kernels = mj.inspect_kernels(mj.sinh(x) * mj.log1p(x) + mj.erf(x))
    assert len(kernels) == 1
