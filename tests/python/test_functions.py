"""The top-level elementwise functions (mj.exp, mj.logical_and, ...) match numpy."""
import numpy as np
import pytest

import metajit as mj

UNARY = {"exp": np.exp, "neg": np.negative, "sqrt": np.sqrt, "floor": np.floor, "tanh": np.tanh,
         "logical_not": np.logical_not}
BINARY = {"add": np.add, "maximum": np.maximum, "logical_and": np.logical_and, "logical_xor": np.logical_xor,
          "less_equal": np.less_equal, "mod": np.mod}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_function(name):
    values = np.linspace(0.1, 3.0, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(getattr(mj, name)(mj.array(values)).numpy(), UNARY[name](values), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_function_broadcasts(name):
    left = np.array([[0.0, 1.5, -2.0]], dtype=np.float32)
    right = np.array([[1.0], [0.0], [-3.0]], dtype=np.float32)
    result = getattr(mj, name)(mj.array(left), mj.array(right)).numpy()
    with np.errstate(invalid="ignore", divide="ignore"):  # mod by zero: nan in both
        expected = BINARY[name](left, right)
    np.testing.assert_allclose(result, expected, rtol=1e-6)
    assert result.shape == (3, 3)


def test_cast_function():
    assert mj.cast(mj.array(np.array([1.7, -1.2], np.float32)), "int32").numpy().tolist() == [1, -1]
