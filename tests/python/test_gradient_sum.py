"""A value's gradient terms that are the same contraction of different operands (a weight used at every step of an
unrolled recurrence) are summed as one product of the stacked operands (meta_ops/gradient_sum.cc): one library call
whose inner extent is steps x batch instead of a call per step. Values against PyTorch; the calls from mj.inspect."""
import re

import numpy as np
import pytest

import metajit as mj

torch = pytest.importorskip("torch")

STEPS, BATCH, INPUTS, HIDDEN = 5, 4, 8, 16


def library_calls(value):
    return [str(kernel) for kernel in mj.inspect(value) if "onednn matmul" in str(kernel)]


def unrolled_cells(rng):
    """The same LSTMCell stepped STEPS times in both frameworks; returns (ours, theirs) after backward."""
    torch.manual_seed(0)
    theirs = torch.nn.LSTMCell(INPUTS, HIDDEN)
    ours = mj.nn.LSTMCell(INPUTS, HIDDEN)
    ours.load_state_dict({key: mj.array(value.detach().numpy()) for key, value in theirs.state_dict().items()})
    data = rng.standard_normal((STEPS, BATCH, INPUTS)).astype(np.float32)
    for framework, cell, inputs in ((mj, ours, mj.array(data)), (torch, theirs, torch.from_numpy(data))):
        hidden = cell_state = framework.zeros(BATCH, HIDDEN)
        for step in range(STEPS):
            hidden, cell_state = cell(inputs[step], (hidden, cell_state))
        (hidden * hidden).sum().backward()
    return ours, theirs


def test_an_unrolled_cells_weight_gradients_are_one_product_over_steps_and_batch(rng):
    ours, theirs = unrolled_cells(rng)
    for name in ("weight_ih", "weight_hh"):
        calls = library_calls(getattr(ours, name).grad)
        columns = getattr(ours, name).shape[1]
        # [4 * HIDDEN, columns] from K = STEPS * BATCH, not one [4 * HIDDEN, columns] product per step
        assert any(f"onednn matmul {4 * HIDDEN}x{STEPS * BATCH}x{columns}" in call for call in calls), calls
        assert not any(f"onednn matmul {4 * HIDDEN}x{BATCH}x{columns}" in call for call in calls), calls
    for name, parameter in theirs.named_parameters():
        np.testing.assert_allclose(getattr(ours, name).grad.numpy(), parameter.grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_a_bias_sums_the_stack_its_weight_made(rng):
    """The biases' terms (sums of the gates' gradient over the batch) reuse the gates' stacked gradient: their
    plan reads it once, with a sum over steps and batch, instead of reading the gradient of every step."""
    ours, theirs = unrolled_cells(rng)
    sources = [kernel.source for kernel in mj.inspect(ours.bias_hh.grad)[-1:]]
    assert any(f"r0 < {STEPS * BATCH}" in source or f"r1 < {BATCH}" in source for source in sources), sources
    np.testing.assert_allclose(ours.bias_hh.grad.numpy(), theirs.bias_hh.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.bias_ih.grad.numpy(), theirs.bias_ih.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_terms_sharing_an_operand_stay_separate_products(rng):
    """x @ W used twice with the same x: stacking would copy x once per term; the terms are added as before."""
    x_data = rng.standard_normal((6, 5)).astype(np.float32)
    w_data = rng.standard_normal((3, 5)).astype(np.float32)
    x, w = mj.array(x_data), mj.array(w_data, requires_grad=True)
    first = mj.nn.functional.linear(x, w)
    second = mj.nn.functional.linear(x, w)
    loss = (first * first).sum() + (second.sin()).sum()
    (gradient,) = mj.grad(loss, [w])
    assert not any(re.search(r"mul +\[2, 6, 3, 5\]", str(kernel)) for kernel in mj.inspect(gradient))
    y = x_data @ w_data.T
    expected = (2 * y + np.cos(y)).T @ x_data
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_terms_with_large_operands_stay_separate_products(rng):
    """A weight used on two large batches: stacking its [512, 16] operands would write more than the [8, 16]
    per-term results it saves, so each term is its own product."""
    w_data = rng.standard_normal((8, 16)).astype(np.float32)
    parts = [rng.standard_normal((512, 16)).astype(np.float32) for _ in range(2)]
    w = mj.array(w_data, requires_grad=True)
    loss = sum((mj.nn.functional.linear(mj.array(part), w) ** 2).sum() for part in parts)
    (gradient,) = mj.grad(loss, [w])
    assert not any(re.search(r"mul +\[2, 512, 8, 16\]|x1024x", str(kernel)) for kernel in mj.inspect(gradient))
    expected = sum(2 * (part @ w_data.T).T @ part for part in parts)
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-4, atol=1e-3)


def test_second_derivatives_through_a_stacked_sum_match_pytorch(rng):
    """mj.grad's result requires grad where its inputs do: the stacked product is differentiated again."""
    xs = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(3)]
    w_data = rng.standard_normal((16, 6)).astype(np.float32)
    ours_x = [mj.array(value, requires_grad=True) for value in xs]
    w = mj.array(w_data, requires_grad=True)
    (gradient,) = mj.grad(sum((mj.nn.functional.linear(x * 2, w).tanh()).sum() for x in ours_x), [w])
    # one product of the three stacked terms (too small for the library: one generated kernel)
    assert any(re.search(r"mul +\[3, 4, 16, 6\]", str(kernel)) for kernel in mj.inspect(gradient))
    second = mj.grad((gradient * gradient).sum(), ours_x)
    theirs_x = [torch.tensor(value, requires_grad=True) for value in xs]
    tw = torch.tensor(w_data, requires_grad=True)
    (expected,) = torch.autograd.grad(sum(torch.nn.functional.linear(x * 2, tw).tanh().sum() for x in theirs_x), tw,
                                      create_graph=True)
    expected_second = torch.autograd.grad((expected * expected).sum(), theirs_x)
    np.testing.assert_allclose(gradient.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    for got, want in zip(second, expected_second):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("through", ["grad", "backward"])
def test_a_hand_written_recurrences_weights_get_one_product_each(rng, through):
    """h = tanh(x_t @ W_x + h @ W_h): matmul's weight gradient (reshaped back from [1, K, N] when built with grad
    mode on, as mj.grad builds it) is stacked over the steps like Linear's."""
    steps, batch = 6, 8
    data = rng.standard_normal((steps, batch, 32)).astype(np.float32)
    weights = [(rng.standard_normal(shape) * 0.1).astype(np.float32) for shape in ((32, 64), (64, 64))]

    def run(framework, array):
        w_x, w_h = (array(value).requires_grad_() for value in weights)
        x, h = array(data), framework.zeros(batch, 64)
        for step in range(steps):
            h = framework.tanh(x[step] @ w_x + h @ w_h)
        loss = (h * h).sum()
        if framework is mj and through == "grad":
            return mj.grad(loss, [w_x, w_h])
        loss.backward()
        return w_x.grad, w_h.grad

    ours = run(mj, mj.array)
    for gradient, rows in zip(ours, (32, 64)):
        calls = library_calls(gradient)
        assert any(f"onednn matmul {rows}x{steps * batch}x64" in call for call in calls), calls
    for got, want in zip(ours, run(torch, torch.from_numpy)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
