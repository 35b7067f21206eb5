"""The names PyTorch scripts reach for (metajit/_torch_names.py, ops/sampling.py): dtype constants, tensor /
as_tensor / from_numpy, manual_seed, empty, eye, is_tensor, inference_mode, and the samplers rand_like,
randn_like, normal, randperm and multinomial (their distributions checked with generous statistical bounds)."""
import numpy as np
import pytest

import metajit as mj


def test_dtype_constants_work_as_dtype_arguments():
    assert mj.zeros(2, dtype=mj.float64).dtype == mj.float64 == "float64"
    assert mj.arange(3).dtype == mj.long and mj.half == mj.float16 and mj.double == mj.float64
    assert mj.array([1, 2]).astype(mj.int32).dtype == "int32"
    assert bool(True) is True and float("1.5") == 1.5  # Python's builtins are not shadowed by `import *`


def test_creation_names():
    data = np.arange(6.0).reshape(2, 3)
    x = mj.tensor(data, dtype=mj.float32, requires_grad=True)
    assert x.dtype == "float32" and x.requires_grad and mj.is_tensor(x) and not mj.is_tensor(data)
    copy = mj.tensor(x)
    assert copy is not x and np.array_equal(copy.numpy(), data)
    assert mj.as_tensor(x) is x
    assert mj.from_numpy(data).dtype == "float64"
    np.testing.assert_array_equal(mj.empty(2, 3).numpy(), np.zeros((2, 3)))
    assert mj.empty_like(x).dtype == "float32"
    np.testing.assert_array_equal(mj.eye(3, 4).numpy(), np.eye(3, 4))


def test_manual_seed_and_inference_mode():
    mj.manual_seed(5)
    first = mj.rand(4).numpy()
    mj.manual_seed(5)
    np.testing.assert_array_equal(mj.rand(4).numpy(), first)
    with mj.inference_mode():
        assert not mj.is_grad_enabled()
    assert mj.is_grad_enabled()


def test_like_samplers_and_normal():
    mj.seed(1)
    base = mj.zeros(2, 3, dtype="float64")
    assert mj.rand_like(base).dtype == "float64" and tuple(mj.randn_like(base).shape) == (2, 3)
    samples = mj.normal(3.0, 0.5, (20000,)).numpy()
    assert abs(samples.mean() - 3.0) < 0.03 and abs(samples.std() - 0.5) < 0.03
    around = mj.normal(mj.array(np.array([0.0, 100.0])), 1.0).numpy()
    assert abs(around[1] - 100) < 6 and abs(around[0]) < 6
    with pytest.raises(ValueError, match="size="):
        mj.normal(0.0, 1.0)


def test_randperm_is_a_permutation():
    mj.seed(2)
    permutation = mj.randperm(50).numpy()
    assert sorted(permutation.tolist()) == list(range(50)) and permutation.dtype == np.int64
    assert permutation.tolist() != list(range(50))


def test_multinomial_with_and_without_replacement():
    mj.seed(3)
    weights = np.array([[1.0, 0.0, 3.0], [2.0, 2.0, 0.0]], np.float32)
    draws = mj.multinomial(mj.array(weights), 4000, replacement=True).numpy()
    assert draws.shape == (2, 4000) and draws.dtype == np.int64
    frequencies = [np.bincount(row, minlength=3) / 4000 for row in draws]
    np.testing.assert_allclose(frequencies[0], [0.25, 0.0, 0.75], atol=0.03)
    np.testing.assert_allclose(frequencies[1], [0.5, 0.5, 0.0], atol=0.03)
    distinct = mj.multinomial(mj.array(weights[0]), 2).numpy()
    assert sorted(distinct.tolist()) == [0, 2]  # never the zero-weight category, never twice
    with pytest.raises(ValueError, match="without replacement"):
        mj.multinomial(mj.array(weights), 4)
