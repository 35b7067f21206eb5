"""sort, argsort and topk against PyTorch (ties in original order, NaN above every number), along any dim and
for several dtypes; the values' gradient scatters back to where each value came from."""
import numpy as np
import pytest

import metajit as mj

torch = pytest.importorskip("torch")


def with_ties_and_nan(rng, shape):
    data = rng.integers(0, 5, shape).astype(np.float32)  # many ties
    data.flat[::7] = np.nan
    return data


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort_match_pytorch(rng, dim, descending):
    data = with_ties_and_nan(rng, (6, 9, 5))
    values, indices = mj.sort(mj.array(data), dim=dim, descending=descending)
    expected = torch.sort(torch.from_numpy(data), dim=dim, descending=descending, stable=True)
    np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())
    np.testing.assert_array_equal(values.numpy(), expected.values.numpy())
    np.testing.assert_array_equal(mj.array(data).argsort(dim, descending).numpy(), expected.indices.numpy())


@pytest.mark.parametrize("k", [0, 1, 3, 9])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_pytorch(rng, k, largest):
    data = rng.standard_normal((4, 9)).astype(np.float32)
    values, indices = mj.array(data).topk(k, largest=largest)
    expected = torch.topk(torch.from_numpy(data), k, largest=largest)
    np.testing.assert_array_equal(values.numpy(), expected.values.numpy())
    np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.float64, np.float16])
def test_other_dtypes(rng, dtype):
    data = (rng.standard_normal((3, 20)) * 30).astype(dtype)
    values, indices = mj.sort(mj.array(data))
    np.testing.assert_array_equal(indices.numpy(), np.argsort(data, axis=-1, kind="stable"))
    np.testing.assert_array_equal(values.numpy(), np.sort(data, axis=-1))
    assert values.dtype == mj.array(data).dtype and indices.dtype == "int64"


def test_gradient_goes_back_to_the_sorted_positions(rng):
    data = rng.standard_normal((3, 6))
    weights = rng.standard_normal((3, 2))
    x = mj.array(data, requires_grad=True)
    gradient = mj.grad((mj.topk(x, 2).values * mj.array(weights)).sum(), x).numpy()
    expected = np.zeros_like(data)
    order = np.argsort(-data, axis=1)[:, :2]
    for row in range(3):
        expected[row, order[row]] = weights[row]
    np.testing.assert_allclose(gradient, expected)


def test_zero_dim_and_empty_inputs_and_errors():
    values, indices = mj.sort(mj.array(np.float32(2.5)))
    assert values.item() == 2.5 and indices.item() == 0
    empty = mj.sort(mj.array(np.zeros((0, 4), np.float32)))
    assert tuple(empty.values.shape) == (0, 4) and tuple(empty.indices.shape) == (0, 4)
    with pytest.raises(ValueError, match="out of range"):
        mj.topk(mj.array(np.zeros(3, np.float32)), 4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("descending", [False, True])
def test_signed_zeros_infinities_and_nans_of_both_signs_order_as_pytorch(dtype, descending):
    """The integer keys: -0 ties with +0 (original order), NaN of either sign above +inf, negatives below."""
    data = np.array([[0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, -1e-45, 1e-45, -3.5, 3.5, -0.0, 0.0,
                      np.finfo(dtype).max, -np.finfo(dtype).max, np.nan]], dtype)
    values, indices = mj.sort(mj.array(data), descending=descending)
    expected = torch.sort(torch.from_numpy(data), descending=descending, stable=True)
    np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())
    np.testing.assert_array_equal(np.signbit(values.numpy()), np.signbit(expected.values.numpy()))


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.bool_])
def test_integer_extremes_and_bools_order_as_numpy(rng, dtype):
    if dtype == np.bool_:
        data = rng.integers(0, 2, (3, 50)).astype(np.bool_)
    else:
        info = np.iinfo(dtype)
        data = rng.integers(info.min, info.max, (3, 50), dtype=dtype, endpoint=True)
        data[:, :2] = [info.min, info.max]
    values, indices = mj.sort(mj.array(data), descending=True)
    order = np.argsort(-data.astype(np.float64) if dtype != np.int64 else ~data, axis=-1, kind="stable")
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(data, order, -1))
    top = mj.topk(mj.array(data), 5)
    np.testing.assert_array_equal(top.indices.numpy(), order[:, :5])
