"""Autodiff over the meta-ops: every gradient rule against central finite differences in float64 and against
PyTorch, higher-order gradients, the PyTorch-style API (requires_grad, backward, .grad, no_grad, detach) and
its errors, and that gradient graphs are freed and fused like forward graphs."""
import gc

import numpy as np
import pytest

import metajit as mj
from conftest import assert_close
from gradient_check import check_gradients, torch_gradients

torch = pytest.importorskip("torch")


@pytest.fixture
def values():
    return np.random.default_rng(7).uniform(-2, 2, size=(3, 4))


@pytest.fixture
def positive():
    return np.random.default_rng(8).uniform(0.5, 2, size=(3, 4))


UNARY = {
    "neg": (lambda x: -x, lambda t: -t),
    "abs": (lambda x: x.abs(), lambda t: t.abs()),
    "exp": (lambda x: x.exp(), lambda t: t.exp()),
    "sin": (lambda x: x.sin(), lambda t: t.sin()),
    "cos": (lambda x: x.cos(), lambda t: t.cos()),
    "tanh": (lambda x: x.tanh(), lambda t: t.tanh()),
    "sigmoid": (lambda x: x.sigmoid(), lambda t: t.sigmoid()),
    "relu": (lambda x: x.relu(), lambda t: t.relu()),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradients_match_finite_differences_and_torch(name, values):
    ours, reference = UNARY[name]
    got = check_gradients(ours, values)
    np.testing.assert_allclose(got[0], torch_gradients(reference, values)[0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,ours,reference", [
    ("log", lambda x: x.log(), lambda t: t.log()),
    ("sqrt", lambda x: x.sqrt(), lambda t: t.sqrt()),
    ("rsqrt", lambda x: x.rsqrt(), lambda t: t.rsqrt()),
])
def test_unary_gradients_on_positive_inputs(name, ours, reference, positive):
    got = check_gradients(ours, positive)
    np.testing.assert_allclose(got[0], torch_gradients(reference, positive)[0], rtol=1e-10)


def test_rounding_ops_have_zero_gradient(values):
    x = mj.array(values + 0.25, requires_grad=True)
    for function in (lambda v: v.floor(), lambda v: v.ceil(), lambda v: v.round()):
        assert_close(mj.grad(function(x).sum(), x), np.zeros_like(values))


BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "div": (lambda a, b: a / b, lambda a, b: a / b),
    "maximum": (lambda a, b: mj.maximum(a, b), torch.maximum),
    "minimum": (lambda a, b: mj.minimum(a, b), torch.minimum),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("right_shape", [(3, 4), (4,), (3, 1)])
def test_binary_gradients_with_broadcasting(name, right_shape, values, positive):
    ours, reference = BINARY[name]
    right = positive[:right_shape[0]] if right_shape == (3, 1) else positive
    right = np.asarray(right).reshape(-1)[:int(np.prod(right_shape))].reshape(right_shape)
    got = check_gradients(ours, values, right)
    expected = torch_gradients(reference, values, right)
    for mine, theirs in zip(got, expected):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)


def test_power_gradients_for_base_and_exponent(positive, values):
    got = check_gradients(lambda a, b: a ** b, positive, values)
    expected = torch_gradients(lambda a, b: a ** b, positive, values)
    for mine, theirs in zip(got, expected):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10)
    check_gradients(lambda a: a ** 3, values)
    check_gradients(lambda a: 2.0 ** a, values)


def test_maximum_splits_ties_evenly_like_torch():
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([1.0, 1.0, 4.0])
    x, y = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    torch.maximum(x, y).sum().backward()
    ours_a = mj.array(a, requires_grad=True)
    ours_b = mj.array(b, requires_grad=True)
    grads = mj.grad(mj.maximum(ours_a, ours_b).sum(), [ours_a, ours_b])
    assert_close(grads[0], x.grad.numpy())
    assert_close(grads[1], y.grad.numpy())


def test_modulo_and_where_gradients(values, positive):
    check_gradients(lambda a, b: a % b, values, positive + 1.5)
    condition = mj.array(values > 0)
    check_gradients(lambda a, b: mj.where(condition, a * a, b.exp()), values, positive)


def test_cast_gradient_returns_to_the_input_dtype():
    x = mj.array(np.array([1.5, -2.0], dtype=np.float32), requires_grad=True)
    y = (x.astype("float64") ** 2).sum()
    g = mj.grad(y, x)
    assert g.dtype == "float32"
    assert_close(g, np.array([3.0, -4.0], dtype=np.float32))


@pytest.mark.parametrize("reduction", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), ((0, 1), True)])
def test_reduction_gradients(reduction, dim, keepdim, positive):
    torch_name = {"max": "amax", "min": "amin"}.get(reduction, reduction)  # x.max(dim) is (values, indices)
    got = check_gradients(lambda a: getattr(a, torch_name)(dim=dim, keepdim=keepdim), positive)

    def reference(t):
        if dim is None:
            return getattr(t, torch_name)()
        if reduction in ("prod",):
            if isinstance(dim, int):
                return t.prod(dim, keepdim=keepdim)
            return t.prod(0, keepdim=True).prod(1, keepdim=True)
        return getattr(t, torch_name)(dim, keepdim=keepdim)
    np.testing.assert_allclose(got[0], torch_gradients(reference, positive)[0], rtol=1e-9)


def test_max_gradient_shared_among_ties_like_amax():
    data = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])
    x = mj.array(data, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    t.amax(1).sum().backward()
    assert_close(mj.grad(x.amax(1).sum(), x), t.grad.numpy())
    assert_close(mj.grad(x.max(1).values.sum(), x), t.grad.numpy())


@pytest.mark.parametrize("name,ours,reference", [
    ("permute", lambda a: a.permute(2, 0, 1), lambda t: t.permute(2, 0, 1)),
    ("transpose", lambda a: a.transpose(0, 2), lambda t: t.transpose(0, 2)),
    ("reshape", lambda a: a.reshape(4, 6), lambda t: t.reshape(4, 6)),
    ("slice", lambda a: a[1:, ::2, 1:3], lambda t: t[1:, ::2, 1:3]),
    ("negative step", lambda a: a[:, ::-1, ::-2], lambda t: t.flip(1)[:, :, ::-1][:, :, ::2].flip(2)),
    ("index", lambda a: a[1, :, 2], lambda t: t[1, :, 2]),
    ("broadcast", lambda a: mj.broadcast_to(a[:, :1, :], (5, 2, 3, 4)), lambda t: t[:, :1, :].expand(5, 2, 3, 4)),
    ("permuted slice", lambda a: a.permute(1, 0, 2)[::2, :, 1:], lambda t: t.permute(1, 0, 2)[::2, :, 1:]),
])
def test_view_gradients(name, ours, reference):
    data = np.random.default_rng(3).normal(size=(2, 3, 4))
    got = check_gradients(ours, data)
    if name != "negative step":  # torch has no negative steps; the finite differences decide there
        np.testing.assert_allclose(got[0], torch_gradients(reference, data)[0], rtol=1e-12)


def test_reindex_gradient_scatters_back_with_overflow():
    data = np.random.default_rng(4).normal(size=(3, 4))
    # shift with padding: out-of-range reads give 0 and no gradient; i0 % 2 duplicates rows (accumulated)
    check_gradients(lambda a: mj.reindex(a, [5, 4], ["i0 - 1", "i1"]), data)
    check_gradients(lambda a: mj.reindex(a, [6, 4], ["i0 % 2", "3 - i1"]), data)
    check_gradients(lambda a: mj.reindex(a, [3, 4], ["i0", "i1"], overflow_conditions=["i1 == 2"]), data)


def test_reindex_with_extra_input_gradient():
    data = np.random.default_rng(5).normal(size=(5, 3))
    index = mj.array(np.array([4, 0, 0, 2], dtype=np.int64))
    got = check_gradients(lambda a: mj.reindex(a, [4, 3], ["@e0(i0)", "i1"], extras=[index]), data)
    expected = np.zeros_like(data)
    weights = np.random.default_rng(0).uniform(0.5, 1.5, size=(4, 3))
    np.add.at(expected, [4, 0, 0, 2], weights)
    np.testing.assert_allclose(got[0], expected, rtol=1e-12)


@pytest.mark.parametrize("op", ["add", "max", "min"])
def test_reindex_reduce_gradients(op):
    data = np.random.default_rng(6).normal(size=(4, 6))
    check_gradients(lambda a: mj.reindex_reduce(a, op, [4, 3], ["i0", "i1 / 2"]), data)
    check_gradients(lambda a: mj.reindex_reduce(a, op, [2], ["i0 - 1"]), data)


def test_third_derivative_of_x_to_the_fourth():
    x = mj.array(np.float64(2.0), requires_grad=True)
    first = mj.grad(x ** 4, x)
    second = mj.grad(first, x)
    third = mj.grad(second, x)
    assert (first.item(), second.item(), third.item()) == (32.0, 48.0, 48.0)


def test_mixed_second_derivatives_match_torch():
    a_data, b_data = np.array([0.3, -0.7]), np.array([1.2, 0.4])
    a, b = mj.array(a_data, requires_grad=True), mj.array(b_data, requires_grad=True)
    da = mj.grad((a.sin() * b * b).sum(), a)
    dadb = mj.grad(da.sum(), b)
    ta, tb = torch.tensor(a_data, requires_grad=True), torch.tensor(b_data, requires_grad=True)
    (tda,) = torch.autograd.grad((ta.sin() * tb * tb).sum(), ta, create_graph=True)
    (tdadb,) = torch.autograd.grad(tda.sum(), tb)
    assert_close(dadb, tdadb.numpy(), rtol=1e-12)


def test_backward_accumulates_into_leaf_grad():
    data = np.array([1.0, 2.0, 3.0])
    x = mj.array(data, requires_grad=True)
    assert x.grad is None and x.is_leaf
    (x * x).sum().backward()
    assert_close(x.grad, 2 * data)
    (x * 3).sum().backward()
    assert_close(x.grad, 2 * data + 3)
    x.grad = None
    (x.exp()).sum().backward()
    assert_close(x.grad, np.exp(data), rtol=1e-12)


def test_backward_with_explicit_gradient_and_intermediates_get_no_grad():
    x = mj.array(np.array([1.0, -2.0]), requires_grad=True)
    hidden = x * 2
    y = hidden ** 2
    y.backward(mj.array(np.array([1.0, 10.0])))
    assert_close(x.grad, np.array([8.0, -160.0]))
    assert hidden.grad is None and not hidden.is_leaf


def test_backward_needs_a_scalar_or_a_gradient():
    x = mj.array(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="one element"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        mj.array(np.ones(3)).sum().backward()


def test_grad_errors_name_the_problem():
    x = mj.array(np.ones(3), requires_grad=True)
    plain = mj.array(np.ones(3))
    with pytest.raises(ValueError, match="input 0 .* does not require grad"):
        mj.grad((x * plain).sum(), [plain])
    with pytest.raises(ValueError, match="output gradient has shape"):
        mj.grad(x * 2, [x], mj.array(np.ones(4)))
    with pytest.raises(ValueError, match="floating-point"):
        mj.grad(x > 0, [x])
    with pytest.raises(ValueError, match="only floating-point"):
        mj.array(np.ones(3, dtype=np.int64), requires_grad=True)
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):  # PyTorch's
        (x * 2).requires_grad = False


def test_unused_input_gets_zeros_and_integer_paths_carry_no_gradient():
    x = mj.array(np.array([1.0, 2.0]), requires_grad=True)
    z = mj.array(np.array([5.0, 6.0]), requires_grad=True)
    grads = mj.grad((x * 2).sum(), [x, z])
    assert_close(grads[1], np.zeros(2))
    through_int = (x.astype("int64") * 3).astype("float64").sum() + x.sum()
    assert_close(mj.grad(through_int, x), np.ones(2))


def test_no_grad_and_detach_stop_gradients():
    x = mj.array(np.array([1.0, 2.0]), requires_grad=True)
    with mj.no_grad():
        y = x * 2
        assert not mj.is_grad_enabled()
    assert not y.requires_grad
    assert mj.is_grad_enabled()
    detached = (x * 3).detach()
    assert not detached.requires_grad
    total = (x * x).sum() + (detached * x).sum()  # d/dx = 2x + 3x (the detached factor is a constant)
    assert_close(mj.grad(total, x), np.array([5.0, 10.0]))
    computed = (x * 3).sync().detach()
    assert_close(mj.grad((computed * x).sum(), x), np.array([3.0, 6.0]))
    slice_of_detached = (x * 3).detach()[::-1]  # views of a detached value must not leak gradient
    assert_close(mj.grad((slice_of_detached * x).sum(), x), np.array([6.0, 3.0]))


def test_no_grad_works_as_decorator():
    @mj.no_grad()
    def doubled(v):
        return v * 2

    x = mj.array(np.ones(2), requires_grad=True)
    assert not doubled(x).requires_grad
    assert (x * 2).requires_grad


def test_gradient_of_an_intermediate_view_is_not_bypassed():
    x = mj.array(np.arange(6.0).reshape(2, 3), requires_grad=True)
    transposed = x.transpose(0, 1)
    y = (transposed[1:] ** 2).sum()
    assert_close(mj.grad(y, transposed), np.array([[0, 0], [2, 8], [4, 10]], dtype=np.float64))


def test_gradients_after_forward_was_computed():
    data = np.array([0.5, 1.5])
    x = mj.array(data, requires_grad=True)
    y = (x.exp() * 2).sum()
    assert y.item() == pytest.approx(2 * np.exp(data).sum())
    assert_close(mj.grad(y, x), 2 * np.exp(data), rtol=1e-12)


def test_assign_replaces_a_leaf_value():
    x = mj.array(np.array([1.0, 2.0]), requires_grad=True)
    x.assign(x.detach() * 10)
    assert x.requires_grad
    assert_close(x, np.array([10.0, 20.0]))
    assert_close(mj.grad((x * x).sum(), x), np.array([20.0, 40.0]))
    with pytest.raises(ValueError, match="shape"):
        x.assign(mj.array(np.ones(3)))
    doubled = x * 2  # any Var can be assigned; gradients then flow to its history, as after a no_grad copy_
    doubled.assign(np.ones(2))
    assert_close(doubled, np.ones(2))
    assert_close(mj.grad((doubled * 3).sum(), x), np.full(2, 6.0))


def test_backward_graph_fuses_into_few_kernels():
    a = mj.array(np.random.default_rng(0).random(1000), requires_grad=True)
    b = mj.array(np.random.default_rng(1).random(1000), requires_grad=True)
    loss = ((a.exp() * b + 1).relu() * 2).sum()
    grads = mj.grad(loss, [a, b])
    mj.reset_stats()
    mj.sync(*grads)
    assert mj.stats()["kernels_launched"] <= 2
    exp_a = np.exp(a.numpy())
    assert_close(grads[0], 2 * exp_a * b.numpy(), rtol=1e-12)
    assert_close(grads[1], 2 * exp_a, rtol=1e-12)


def test_gradient_graphs_are_freed():
    gc.collect()
    before = mj.stats()["vars_live"]
    x = mj.array(np.random.default_rng(0).random((8, 8)), requires_grad=True)
    for _ in range(5):
        y = (x.tanh() @ x).sum() if hasattr(mj.Var, "__matmul__") else (x.tanh() * x).sum()
        mj.grad(y, x).numpy()
    del x, y
    gc.collect()
    assert mj.stats()["vars_live"] == before


def test_values_recorded_before_an_assign_keep_the_old_value():
    """PyTorch's semantics: an op recorded before x changes reads the old x, also when it runs after."""
    x = mj.array(np.ones(3, dtype=np.float32), requires_grad=True)
    before = x * 2  # recorded before the assignment, computed after it
    computed_before = (x * 3).sync()
    x.assign(mj.full([3], 5.0))
    assert_close(before, np.full(3, 2.0, dtype=np.float32))
    assert_close(computed_before, np.full(3, 3.0, dtype=np.float32))
    assert_close(x * 2, np.full(3, 10.0, dtype=np.float32))  # recorded after: the new value
    assert x.is_leaf and x.requires_grad
