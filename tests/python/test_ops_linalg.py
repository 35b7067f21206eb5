"""Matrix products (metajit.ops.linalg): matmul for every rank combination numpy and PyTorch allow, bmm, linear and
the @ operator, each against numpy; gradients against PyTorch (float64) and central finite differences; errors."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from conftest import assert_close, launched
from gradient_check import check_gradients

torch = pytest.importorskip("torch")


def torch_gradients(torch_function, arrays, weights):
    """Forward value and input gradients of sum(torch_function(*arrays) * weights) in float64."""
    tensors = [torch.tensor(array, requires_grad=True) for array in arrays]
    output = torch_function(*tensors)
    (output * torch.tensor(weights)).sum().backward()
    return output.detach().numpy(), [tensor.grad.numpy() for tensor in tensors]


def assert_matches_torch(function, torch_function, arrays, rtol=1e-10, atol=1e-12, seed=0):
    """function (metajit) and torch_function agree on the value and on every input's gradient (float64)."""
    inputs = [mj.array(array, requires_grad=True) for array in arrays]
    output = function(*inputs)
    weights = np.random.default_rng(seed).standard_normal(output.shape)
    expected, expected_gradients = torch_gradients(torch_function, arrays, weights)
    assert_close(output, expected, rtol=rtol, atol=atol)
    gradients = mj.grad((output * mj.array(weights)).sum(), inputs)
    for index, (gradient, reference) in enumerate(zip(gradients, expected_gradients)):
        assert_close(gradient, reference, rtol=rtol, atol=atol)


SHAPE_PAIRS = [
    ((4,), (4,)),                   # dot product -> 0-d
    ((4,), (4, 3)),                 # row vector
    ((5, 4), (4,)),                 # column vector
    ((5, 4), (4, 3)),
    ((2, 5, 4), (4, 3)),            # batch x matrix
    ((4,), (2, 4, 3)),              # vector x batch
    ((2, 5, 4), (4,)),
    ((2, 1, 5, 4), (3, 4, 2)),      # broadcast batch dims
    ((1, 5, 4), (3, 4, 2)),
]


@pytest.mark.parametrize("left_shape,right_shape", SHAPE_PAIRS)
def test_matmul_matches_numpy(rng, left_shape, right_shape):
    left = rng.standard_normal(left_shape).astype(np.float32)
    right = rng.standard_normal(right_shape).astype(np.float32)
    result = mj.matmul(mj.array(left), mj.array(right))
    assert_close(result, np.matmul(left, right), rtol=1e-5, atol=1e-5, dtype=np.float32)


@pytest.mark.parametrize("left_shape,right_shape", SHAPE_PAIRS)
def test_matmul_gradients_match_torch(rng, left_shape, right_shape):
    arrays = [rng.standard_normal(left_shape), rng.standard_normal(right_shape)]
    assert_matches_torch(mj.matmul, torch.matmul, arrays)


def test_matmul_finite_differences(rng):
    check_gradients(mj.matmul, rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 2)))
    check_gradients(mj.matmul, rng.standard_normal(3), rng.standard_normal(3))


def test_matmul_operator_and_method(rng):
    left = rng.standard_normal((3, 4)).astype(np.float32)
    right = rng.standard_normal((4, 2)).astype(np.float32)
    expected = left @ right
    assert_close(mj.array(left) @ mj.array(right), expected, rtol=1e-5, atol=1e-6)
    assert_close(mj.array(left).matmul(mj.array(right)), expected, rtol=1e-5, atol=1e-6)
    assert_close(mj.array(left) @ right, expected, rtol=1e-5, atol=1e-6)      # numpy on the right
    assert_close(left @ mj.array(right), expected, rtol=1e-5, atol=1e-6)      # numpy on the left: __rmatmul__
    assert_close(F.matmul(mj.array(left), mj.array(right)), expected, rtol=1e-5, atol=1e-6)


def test_matmul_integer_keeps_dtype(rng):
    left = rng.integers(-5, 5, size=(3, 4)).astype(np.int32)
    right = rng.integers(-5, 5, size=(4, 2)).astype(np.int32)
    assert_close(mj.matmul(mj.array(left), mj.array(right)), left @ right, dtype=np.int32)


def test_matmul_is_one_kernel(rng):
    left = mj.array(rng.standard_normal((6, 5)).astype(np.float32))
    right = mj.array(rng.standard_normal((5, 7)).astype(np.float32))
    _, kernels = launched(lambda: (left @ right).numpy())
    assert kernels == 1


def test_bmm(rng):
    left, right = rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 4, 5))
    assert_close(mj.bmm(mj.array(left), mj.array(right)), left @ right, rtol=1e-12)
    assert_matches_torch(mj.bmm, torch.bmm, [left, right])


@pytest.mark.parametrize("input_shape", [(6,), (3, 6), (2, 3, 6)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_matches_torch(rng, input_shape, with_bias):
    arrays = [rng.standard_normal(input_shape), rng.standard_normal((4, 6))]
    if with_bias:
        arrays.append(rng.standard_normal(4))
    assert_matches_torch(F.linear, torch.nn.functional.linear, arrays)


def test_linear_finite_differences(rng):
    check_gradients(F.linear, rng.standard_normal((2, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4))


def test_matmul_errors():
    with pytest.raises(ValueError, match="cannot be multiplied"):
        mj.matmul(mj.zeros(3, 4), mj.zeros(5, 2))
    with pytest.raises(ValueError, match="cannot be multiplied"):
        mj.matmul(mj.zeros(3), mj.zeros(4))
    with pytest.raises(ValueError, match="batch dimensions"):
        mj.matmul(mj.zeros(2, 3, 4), mj.zeros(3, 4, 5))
    with pytest.raises(ValueError, match="at least 1 dimension"):
        mj.matmul(mj.zeros([]), mj.zeros(3))
    with pytest.raises(TypeError, match="metajit Var"):
        mj.matmul(mj.zeros(3, 4), [[1.0]])


def test_bmm_and_linear_errors():
    with pytest.raises(ValueError, match="3-D"):
        mj.bmm(mj.zeros(3, 4), mj.zeros(4, 5))
    with pytest.raises(ValueError, match="batch sizes differ"):
        mj.bmm(mj.zeros(2, 3, 4), mj.zeros(3, 4, 5))
    with pytest.raises(ValueError, match="cannot be multiplied"):
        mj.bmm(mj.zeros(2, 3, 4), mj.zeros(2, 5, 5))
    with pytest.raises(ValueError, match="input has 5 features"):
        F.linear(mj.zeros(2, 5), mj.zeros(3, 4))
    with pytest.raises(ValueError, match="bias must have shape"):
        F.linear(mj.zeros(2, 4), mj.zeros(3, 4), mj.zeros(4))
    with pytest.raises(ValueError, match="weight must be 1-D or 2-D"):
        F.linear(mj.zeros(2, 4), mj.zeros(1, 3, 4))


def test_mm_mv_dot_outer_match_torch(rng):
    assert_matches_torch(mj.mm, torch.mm, [rng.standard_normal((3, 4)), rng.standard_normal((4, 2))])
    assert_matches_torch(mj.mv, torch.mv, [rng.standard_normal((3, 4)), rng.standard_normal(4)])
    assert_matches_torch(mj.dot, torch.dot, [rng.standard_normal(5), rng.standard_normal(5)])
    assert_matches_torch(mj.outer, torch.outer, [rng.standard_normal(3), rng.standard_normal(4)])


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 3.0)])
def test_addmm_matches_torch(rng, beta, alpha):
    arrays = [rng.standard_normal(2), rng.standard_normal((3, 4)), rng.standard_normal((4, 2))]
    assert_matches_torch(lambda i, a, b: mj.addmm(i, a, b, beta=beta, alpha=alpha),
                         lambda i, a, b: torch.addmm(i, a, b, beta=beta, alpha=alpha), arrays)


def test_addmm_with_zero_beta_ignores_nan_input():
    result = mj.addmm(mj.full([2, 2], float("nan")), mj.ones(2, 3), mj.ones(3, 2), beta=0)
    assert_close(result, np.full((2, 2), 3.0, np.float32))


def test_rank_checked_products_errors():
    with pytest.raises(ValueError, match="mm: expected 2-D and 2-D arguments"):
        mj.mm(mj.zeros(2, 3, 4), mj.zeros(4, 2))
    with pytest.raises(ValueError, match="mv: expected 2-D and 1-D arguments"):
        mj.mv(mj.zeros(3, 4), mj.zeros(4, 1))
    with pytest.raises(ValueError, match="dot: expected 1-D and 1-D arguments"):
        mj.dot(mj.zeros(3, 1), mj.zeros(3))
    with pytest.raises(ValueError, match="cannot be multiplied"):
        mj.dot(mj.zeros(3), mj.zeros(4))
    with pytest.raises(ValueError, match="outer: expected 1-D and 1-D arguments"):
        mj.outer(mj.zeros(3, 1), mj.zeros(3))


@pytest.mark.parametrize("left_shape", [(64, 96), (96,), (2, 5, 96)])
def test_product_with_a_transposed_matrix_matches_numpy(rng, left_shape):
    x = rng.standard_normal(left_shape).astype(np.float32)
    w = rng.standard_normal((80, 96)).astype(np.float32)
    assert_close(mj.array(x) @ mj.array(w).T, x @ w.T, rtol=1e-4, atol=1e-4)
    assert_close(mj.matmul(mj.array(x), mj.array(w).transpose(0, 1)), x @ w.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("product", ["x @ w.T", "linear"])
def test_weight_gradient_of_a_transposed_product_needs_no_transpose_kernel(rng, product):
    """x @ w.T and F.linear are computed over w's own [out, in] layout, so the gradient of w comes out in that
    layout: an optimizer update reads it in place instead of through a tiled transpose kernel."""
    x_values = rng.standard_normal((64, 96)).astype(np.float32)
    w_values = rng.standard_normal((80, 96)).astype(np.float32)
    x, w = mj.array(x_values), mj.array(w_values, requires_grad=True)
    y = x @ w.T if product == "x @ w.T" else F.linear(x, w)
    gradient, = mj.grad((y * y).sum(), [w])
    update = w - gradient * 0.01
    sources = [kernel["source"] for kernel in mj.inspect_kernels(update)]
    assert not any("mj_transpose_tile(" in source for source in sources)
    expected = w_values - 0.01 * (2 * (x_values @ w_values.T).T @ x_values)
    assert_close(update, expected, rtol=1e-4, atol=1e-3)


def test_transposed_source_is_only_a_plain_transpose(rng):
    w = mj.array(rng.standard_normal((4, 6)).astype(np.float32))
    assert mj._core.transposed_matrix_source(w.T) is not None
    assert mj._core.transposed_matrix_source(w) is None
    assert mj._core.transposed_matrix_source(w[:, ::2].T) is None  # a strided view: not plain
    assert mj._core.transposed_matrix_source(w.reshape([6, 4])) is None
