"""Activations and the softmax family (metajit.ops.activation) against PyTorch: values in float32 and float64,
gradients against central finite differences (float64) and against PyTorch's autograd, numerically hard inputs
(huge logits, -inf rows, kinks at 0) and errors."""
import warnings

import numpy as np
import pytest

import metajit as mj
from conftest import assert_close
from gradient_check import check_gradients, torch_gradients

torch = pytest.importorskip("torch")
functional = torch.nn.functional


@pytest.fixture
def values():
    return np.random.default_rng(3).uniform(-3, 3, size=(3, 4))


# name: (metajit function, torch function); each is called with one Var/tensor.
ELEMENTWISE = {
    "relu": (lambda x: mj.ops.relu(x, inplace=False), functional.relu),
    "relu6": (lambda x: mj.relu6(x), functional.relu6),
    "leaky_relu": (lambda x: mj.leaky_relu(x, 0.2), lambda t: functional.leaky_relu(t, 0.2)),
    "leaky_relu_default": (lambda x: mj.leaky_relu(x), functional.leaky_relu),
    "gelu": (lambda x: mj.gelu(x), functional.gelu),
    "gelu_tanh": (lambda x: mj.gelu(x, approximate="tanh"), lambda t: functional.gelu(t, approximate="tanh")),
    "silu": (lambda x: mj.silu(x), functional.silu),
    "sigmoid": (lambda x: mj.sigmoid(x), torch.sigmoid),
    "tanh": (lambda x: mj.tanh(x), torch.tanh),
    "elu": (lambda x: mj.elu(x), functional.elu),
    "elu_alpha": (lambda x: mj.elu(x, alpha=0.5), lambda t: functional.elu(t, alpha=0.5)),
    "softplus": (lambda x: mj.softplus(x), functional.softplus),
    "softplus_beta": (lambda x: mj.softplus(x, beta=2.0, threshold=4.0),
                      lambda t: functional.softplus(t, beta=2.0, threshold=4.0)),
    "hardtanh": (lambda x: mj.hardtanh(x), functional.hardtanh),
    "hardtanh_bounds": (lambda x: mj.hardtanh(x, -2.0, 0.5), lambda t: functional.hardtanh(t, -2.0, 0.5)),
}



@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_activation_values_match_torch(name, dtype, rng):
    ours, reference = ELEMENTWISE[name]
    data = rng.uniform(-7, 7, size=(4, 5)).astype(dtype)
    expected = reference(torch.tensor(data)).numpy()
    tolerance = 2e-6 if dtype == "float32" else 1e-12
    assert_close(ours(mj.array(data)), expected, rtol=tolerance, atol=tolerance, dtype=dtype)


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_activation_gradients_match_finite_differences_and_torch(name, values):
    ours, reference = ELEMENTWISE[name]
    got = check_gradients(ours, values)
    np.testing.assert_allclose(got[0], torch_gradients(reference, values)[0], rtol=1e-10, atol=1e-10)


def test_gradients_at_the_kink_match_torch():
    """At exactly 0 each piecewise formula must take PyTorch's branch (elu: alpha, softplus: 1/2, relu: 0, ...)."""
    data = np.array([0.0, -1.0, 1.0, 6.0, -1.0 + 0.0])
    for name in ("relu", "relu6", "leaky_relu", "elu", "elu_alpha", "softplus", "gelu", "gelu_tanh", "silu",
                 "hardtanh"):
        ours, reference = ELEMENTWISE[name]
        x = mj.array(data, requires_grad=True)
        got = mj.grad(ours(x).sum(), x).numpy()
        t = torch.tensor(data, requires_grad=True)
        reference(t).sum().backward()
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-6, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_extreme_inputs_stay_finite_and_match_torch(dtype):
    data = np.array([-1000.0, -100.0, -30.0, -1e-9, 0.0, 1e-9, 30.0, 100.0, 1000.0], dtype=dtype)
    for name in ("softplus", "elu", "silu", "gelu", "gelu_tanh", "sigmoid", "tanh"):
        ours, reference = ELEMENTWISE[name]
        x = mj.array(data, requires_grad=True)
        value = ours(x)
        gradient = mj.grad(value.sum(), x).numpy()
        t = torch.tensor(data, requires_grad=True)
        expected = reference(t)
        expected.sum().backward()
        assert np.all(np.isfinite(gradient)), name
        tolerance = 1e-6 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(value.numpy(), expected.detach().numpy(), rtol=tolerance, atol=tolerance,
                                   err_msg=name)
        np.testing.assert_allclose(gradient, t.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_softplus_and_elu_keep_relative_accuracy_near_zero():
    """log1p / expm1 matter here: exp(x) - 1 and log(1 + y) would lose every digit of a 1e-9 result."""
    tiny = np.array([-1e-9, -3e-7, -20.0, -40.0], dtype=np.float32)
    assert_close(mj.elu(mj.array(tiny)), np.expm1(tiny.astype(np.float64)), rtol=1e-6)
    large = np.array([-20.0, -30.0, -50.0], dtype=np.float32)
    assert_close(mj.softplus(mj.array(large)), np.log1p(np.exp(large.astype(np.float64))), rtol=1e-5)


# --------------------------------------------------------------------------------------------- softmax family
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax_match_torch(dim, rng):
    data = rng.uniform(-5, 5, size=(3, 4, 5)).astype(np.float32)
    t = torch.tensor(data)
    assert_close(mj.softmax(mj.array(data), dim), torch.softmax(t, dim).numpy(), rtol=1e-6, atol=1e-7)
    assert_close(mj.log_softmax(mj.array(data), dim), torch.log_softmax(t, dim).numpy(), rtol=1e-6, atol=1e-6)
    assert_close(mj.array(data).softmax(dim), torch.softmax(t, dim).numpy(), rtol=1e-6, atol=1e-7)
    assert_close(mj.array(data).log_softmax(dim=dim), torch.log_softmax(t, dim).numpy(), rtol=1e-6, atol=1e-6)


def test_softmax_is_stable_for_huge_logits_and_handles_infinities():
    # +inf in a row makes the whole row nan in softmax and log-softmax (inf - inf), and inf in logsumexp.
    data = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0], [-np.inf, 0.0, -np.inf],
                     [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 0.0], [np.inf, np.inf, 1.0], [np.nan, 0.0, 1.0]],
                    dtype=np.float32)
    t = torch.tensor(data)
    assert_close(mj.softmax(mj.array(data), 1), torch.softmax(t, 1).numpy(), rtol=1e-6, atol=1e-7, equal_nan=True)
    assert_close(mj.log_softmax(mj.array(data), 1), torch.log_softmax(t, 1).numpy(), rtol=1e-6, atol=1e-5,
                 equal_nan=True)
    assert_close(mj.logsumexp(mj.array(data), 1), torch.logsumexp(t, 1).numpy(), rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("dim,keepdim", [(1, False), (0, True), ((0, 2), False), ([-1, 0], True)], ids=repr)
def test_logsumexp_matches_torch(dim, keepdim, rng):
    data = rng.uniform(-50, 50, size=(2, 3, 4))
    expected = torch.logsumexp(torch.tensor(data), dim, keepdim).numpy()
    assert_close(mj.logsumexp(mj.array(data), dim, keepdim), expected, rtol=1e-12)
    assert_close(mj.array(data).logsumexp(dim, keepdim=keepdim), expected, rtol=1e-12)


def test_softmax_family_gradients_match_finite_differences_and_torch(values):
    cases = [
        (lambda x: mj.softmax(x, 1), lambda t: torch.softmax(t, 1)),
        (lambda x: mj.softmax(x, 0), lambda t: torch.softmax(t, 0)),
        (lambda x: mj.log_softmax(x, 1), lambda t: torch.log_softmax(t, 1)),
        (lambda x: mj.logsumexp(x, 1), lambda t: torch.logsumexp(t, 1)),
        (lambda x: mj.logsumexp(x, (0, 1), keepdim=True), lambda t: torch.logsumexp(t, (0, 1), keepdim=True)),
    ]
    for ours, reference in cases:
        got = check_gradients(ours, values)
        np.testing.assert_allclose(got[0], torch_gradients(reference, values)[0], rtol=1e-9, atol=1e-12)


def test_softmax_second_derivative_matches_torch(values):
    x = mj.array(values, requires_grad=True)
    first = mj.grad((mj.softmax(x, 1) * mj.array(values)).sum(), x)
    second = mj.grad((first * first).sum(), x).numpy()
    t = torch.tensor(values, requires_grad=True)
    (torch_first,) = torch.autograd.grad((torch.softmax(t, 1) * torch.tensor(values)).sum(), t, create_graph=True)
    (torch_second,) = torch.autograd.grad((torch_first * torch_first).sum(), t)
    np.testing.assert_allclose(second, torch_second.numpy(), rtol=1e-9, atol=1e-12)


def test_softmax_dtype_argument_and_implicit_dim(rng):
    data = rng.uniform(-2, 2, size=(2, 3)).astype(np.float32)
    result = mj.softmax(mj.array(data), 1, dtype="float64")
    assert result.dtype == "float64"
    assert_close(result, torch.softmax(torch.tensor(data, dtype=torch.float64), 1).numpy(), rtol=1e-12)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        implicit = mj.softmax(mj.array(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = functional.softmax(torch.tensor(data), dim=None).numpy()
    assert_close(implicit, expected, rtol=1e-6)


def test_softmax_fuses_into_three_kernels(rng):
    x = mj.array(rng.uniform(-1, 1, size=(8, 16)).astype(np.float32))
    assert len(mj.inspect_kernels(mj.softmax(x, 1))) <= 3
    assert len(mj.inspect_kernels(mj.log_softmax(x, 1))) <= 3


def test_activations_are_exposed_in_nn_functional():
    import metajit.nn.functional as F
    for name in ("softmax", "log_softmax", "logsumexp", "relu", "relu6", "leaky_relu", "gelu", "silu", "sigmoid",
                 "tanh", "elu", "softplus", "hardtanh"):
        assert callable(getattr(F, name)), name
        assert callable(getattr(mj, name)), name


def test_activation_errors():
    x = mj.array(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="approximate"):
        mj.gelu(x, approximate="fast")
    with pytest.raises(TypeError, match="floating-point"):
        mj.softmax(mj.array(np.zeros((2, 3), np.int64)), 1)
    with pytest.raises(IndexError, match="out of range"):
        mj.softmax(x, 2)
    with pytest.raises(IndexError, match="out of range"):
        mj.logsumexp(x, -3)
    with pytest.raises(ValueError, match="min_val"):
        mj.hardtanh(x, 1.0, -1.0)
