"""mj.Function: custom gradients written in ops, PyTorch style and Jittor style, with several inputs and
outputs, and gradients of gradients (checked against finite differences in float64)."""
import numpy as np
import pytest

import metajit as mj
from conftest import assert_close
from gradient_check import check_gradients, numeric_gradients


class Cube(mj.Function):
    """x**3 with a hand-written gradient (3 x^2), itself differentiable."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * 3 * x * x


class ScaledSoftplus(mj.Function):
    """Jittor style: execute / grad on self, a non-Var argument, log(1 + exp(s x))."""

    def execute(self, x, scale):
        self.x, self.scale = x, scale
        return (x * scale).exp().log1p() if hasattr(mj.Var, "log1p") else ((x * scale).exp() + 1).log()

    def grad(self, grad):
        return grad * self.scale * (self.x * self.scale).sigmoid(), None


class MulAndDifference(mj.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b, a - b

    @staticmethod
    def backward(ctx, grad_product, grad_difference):
        a, b = ctx.saved_tensors
        return grad_product * b + grad_difference, grad_product * a - grad_difference


def test_value_and_first_gradient_match_finite_differences():
    values = np.random.default_rng(0).uniform(-2, 2, (3, 4))
    check_gradients(lambda x: Cube.apply(x), values)


def test_second_order_gradient_matches_finite_differences():
    values = np.random.default_rng(1).uniform(-2, 2, (5,))
    weights = np.random.default_rng(2).uniform(-1, 1, (5,))

    def first_gradient(array):
        x = mj.array(array, requires_grad=True)
        return mj.grad((Cube.apply(x) * mj.array(weights)).sum(), x)

    # Second derivative through the custom backward ...
    x = mj.array(values, requires_grad=True)
    first = mj.grad((Cube.apply(x) * mj.array(weights)).sum(), x)
    second = mj.grad(first.sum(), x)
    # ... against central differences of the first gradient.
    numeric = numeric_gradients(lambda a: first_gradient(a.numpy()), [values], np.ones(5))[0]
    assert_close(second, numeric, rtol=1e-5, atol=1e-6)
    assert_close(second, 6 * values * weights, rtol=1e-10)


def test_third_order_through_function():
    x = mj.array(np.array(2.0), requires_grad=True)
    first = mj.grad(Cube.apply(x), x)
    second = mj.grad(first, x)
    third = mj.grad(second, x)
    assert (first.item(), second.item(), third.item()) == (12.0, 12.0, 6.0)


def test_jittor_style_with_constant_argument():
    values = np.random.default_rng(3).uniform(-2, 2, (6,))
    check_gradients(lambda x: ScaledSoftplus()(x, 1.5), values)


def test_several_inputs_and_outputs():
    a_values = np.random.default_rng(4).uniform(-2, 2, (2, 3))
    b_values = np.random.default_rng(5).uniform(-2, 2, (2, 3))
    check_gradients(lambda a, b: sum_of(MulAndDifference.apply(a, b)), a_values, b_values)


def sum_of(outputs):
    product, difference = outputs
    return product * 2 + difference * difference


def test_backward_runs_once_for_all_outputs():
    calls = []

    class Pair(mj.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, grad_double, grad_triple):
            calls.append(1)
            return grad_double * 2 + grad_triple * 3

    x = mj.array(np.ones(3), requires_grad=True)
    double, triple = Pair.apply(x)
    assert_close(mj.grad((double + triple).sum(), x), np.full(3, 5.0))
    assert len(calls) == 1
    # Only one output used: the other output's gradient arrives as zeros.
    assert_close(mj.grad(triple.sum(), x), np.full(3, 3.0))
    # ... also when the unused output is gone (its gradient used to need the node alive).
    _, triple = Pair.apply(x)
    assert_close(mj.grad(triple.sum(), x), np.full(3, 3.0))


def test_no_gradient_bookkeeping_without_requires_grad():
    x = mj.array(np.arange(3.0))
    y = Cube.apply(x)
    assert not y.requires_grad
    assert_close(y, np.arange(3.0) ** 3)


def test_forward_is_recorded_without_gradient_history():
    seen = []

    class Probe(mj.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            seen.append(y.requires_grad)
            return y

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    x = mj.array(np.ones(2), requires_grad=True)
    assert Probe.apply(x).requires_grad
    assert seen == [False]


def test_wrong_gradient_count_and_shape_are_clear_errors():
    class WrongCount(mj.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    class WrongShape(mj.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return grad.sum()

    x = mj.array(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError, match="WrongCount.backward returned 2 gradients"):
        mj.grad(WrongCount.apply(x).sum(), x)
    with pytest.raises(ValueError, match="WrongShape: backward returned a gradient of shape"):
        mj.grad(WrongShape.apply(x).sum(), x)


def test_missing_methods_are_named():
    class Empty(mj.Function):
        pass

    with pytest.raises(NotImplementedError, match="forward or execute"):
        Empty.apply(mj.array(np.ones(2)))


def test_function_in_a_training_step():
    rng = np.random.default_rng(6)
    weight = mj.array(rng.normal(size=(4, 3)), requires_grad=True)
    inputs = mj.array(rng.normal(size=(8, 4)))
    optimizer = mj.optim.SGD([weight], lr=0.01)
    losses = []
    for _ in range(3):
        loss = Cube.apply(inputs @ weight).abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[2] < losses[0]
