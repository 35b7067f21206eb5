"""PyTorch's Var conveniences: dtype conversions, t(), contiguous(), clone(), expand / expand_as / view_as,
new_zeros / new_ones, tolist, add / sub with alpha, pow, and tril / triu, against numpy."""
import numpy as np
import pytest

import metajit as mj


def test_dtype_conversions(rng):
    x = mj.array(rng.standard_normal((2, 3)).astype(np.float32) * 10)
    for method, dtype in (("float", "float32"), ("double", "float64"), ("half", "float16"), ("int", "int32"),
                          ("long", "int64"), ("bool", "bool")):
        assert getattr(x, method)().dtype == dtype
    np.testing.assert_array_equal(x.long().numpy(), x.numpy().astype(np.int64))
    assert x.type_as(mj.array(np.zeros(1, np.float64))).dtype == "float64"


def test_t_contiguous_and_clone(rng):
    data = rng.standard_normal((3, 5)).astype(np.float32)
    x = mj.array(data)
    np.testing.assert_array_equal(x.t().numpy(), data.T)
    assert tuple(mj.array(data[0]).t().shape) == (5,)
    with pytest.raises(ValueError, match="at most 2 dimensions"):
        mj.array(np.zeros((2, 2, 2), np.float32)).t()
    assert x.contiguous() is x
    copy = x.clone()
    mj.sync(copy)
    x[0, 0] = 100.0  # assigning to x must not change the computed clone
    np.testing.assert_array_equal(copy.numpy(), data)
    assert x.numpy()[0, 0] == 100.0


def test_gradient_flows_through_clone(rng):
    data = rng.standard_normal(4)
    x = mj.array(data, requires_grad=True)
    np.testing.assert_allclose(mj.grad((x.clone() * x).sum(), x).numpy(), 2 * data)


def test_expand_expand_as_view_as(rng):
    data = rng.standard_normal((3, 1)).astype(np.float32)
    x = mj.array(data)
    np.testing.assert_array_equal(x.expand(2, -1, 4).numpy(), np.broadcast_to(data, (2, 3, 4)))
    np.testing.assert_array_equal(x.expand_as(mj.zeros(3, 6)).numpy(), np.broadcast_to(data, (3, 6)))
    assert tuple(x.view_as(mj.zeros(1, 3)).shape) == (1, 3)
    with pytest.raises(ValueError, match="new leading dimension"):
        x.expand(-1, 3, 1)


def test_new_tensors_tolist_and_arithmetic(rng):
    x = mj.array(np.array([[1.0, 2.0]], np.float64))
    assert x.new_zeros(2, 3).dtype == "float64" and tuple(x.new_ones((4,)).shape) == (4,)
    assert x.tolist() == [[1.0, 2.0]]
    np.testing.assert_array_equal(x.add(x, alpha=3).numpy(), [[4.0, 8.0]])
    np.testing.assert_array_equal(x.sub(1.0).numpy(), [[0.0, 1.0]])
    np.testing.assert_array_equal(x.mul(x).div(2.0).pow(2).numpy(), [[0.25, 4.0]])


@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3])
def test_tril_and_triu_match_numpy(rng, diagonal):
    data = rng.standard_normal((2, 4, 5)).astype(np.float32)
    x = mj.array(data)
    np.testing.assert_array_equal(mj.tril(x, diagonal).numpy(), np.tril(data, diagonal))
    np.testing.assert_array_equal(x.triu(diagonal).numpy(), np.triu(data, diagonal))


def test_tril_gradient_and_errors(rng):
    data = rng.standard_normal((3, 3))
    x = mj.array(data, requires_grad=True)
    np.testing.assert_array_equal(mj.grad(mj.tril(x).sum(), x).numpy(), np.tril(np.ones((3, 3))))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        mj.triu(mj.array(np.zeros(3, np.float32)))


def test_to_dim_unbind_where_and_comparisons(rng):
    data = rng.standard_normal((2, 3)).astype(np.float32)
    x = mj.array(data)
    assert x.to("float64").dtype == "float64" and x.to(np.int32).dtype == "int32"
    assert x.to("cpu") is x and x.cpu() is x and x.to(mj.zeros(1, dtype="int64")).dtype == "int64"
    assert x.to("cpu", "float16").dtype == "float16"
    with pytest.raises(ValueError, match="not a metajit device"):
        x.to("tpu")
    assert x.dim() == 2 and x.nelement() == 6 and x.byte().dtype == "uint8"
    pieces = x.unbind(1)
    assert len(pieces) == 3
    np.testing.assert_array_equal(pieces[2].numpy(), data[:, 2])
    np.testing.assert_array_equal(x.where(x > 0, 0.0).numpy(), np.where(data > 0, data, 0))
    np.testing.assert_allclose(x.mm(x.t()).numpy(), data @ data.T, rtol=1e-5)


@pytest.mark.skipif(mj.cuda.is_available(), reason="this machine has a usable NVIDIA driver")
def test_cuda_says_what_is_missing():
    x = mj.zeros(2)
    with pytest.raises(mj.CudaUnavailableError, match="x.cuda\\(\\): CUDA is not available"):
        x.cuda()
    with pytest.raises(mj.CudaUnavailableError, match="CUDA is not available"):
        x.to("cuda:0")
