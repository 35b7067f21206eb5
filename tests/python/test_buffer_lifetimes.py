"""Intermediate buffers go back to the allocator right after the last kernel that reads them (jit/buffer_lifetimes.h),
unless something outside the run still holds them; backward() without retain_graph lets a graph's values go once
they are computed. Values must never change because of either: every test compares with numpy."""
import numpy as np
import pytest

import metajit as mj
from conftest import assert_close, cpu_backend, flag_set

MB = 2 ** 20


def _chain_inputs(rng):
    x = rng.standard_normal((2048, 256)).astype(np.float32)   # 2 MB: each product in the chain is this size
    w = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
    return x, w


def _numpy_chain(x, w, steps):
    values = [x]
    for _ in range(steps):
        values.append(np.maximum(values[-1] @ w, 0))
    return values


def _peak_of(function):
    """Peak host bytes allocated while `function` runs, above what was allocated before it."""
    before = mj.stats()["bytes_allocated"]
    mj.reset_stats()
    result = function()
    return result, mj.stats()["bytes_allocated_peak"] - before, mj.stats()["buffers_released_early"]


@cpu_backend  # host allocator peaks (test_cuda_execution.py checks the CUDA runner's early release)
def test_chain_keeps_only_live_intermediates():
    x, w = _chain_inputs(np.random.default_rng(0))
    a, b = mj.array(x), mj.array(w)
    mj.sync(a, b)

    def run():
        y = a
        for _ in range(8):
            y = (y @ b).relu()
        out = y.sum(1)
        mj.sync(out)
        return out

    out, peak, released = _peak_of(run)
    expected = _numpy_chain(x, w, 8)[-1].sum(1)
    assert_close(out.numpy(), expected, rtol=1e-4, atol=1e-3)
    # Eight 2 MB products are computed one after another; kept all together they would need 16 MB.
    assert released >= 7
    assert peak <= 6 * MB, f"peak {peak / MB:.1f} MB"


def test_values_held_outside_the_run_survive():
    rng = np.random.default_rng(1)
    x, w = _chain_inputs(rng)
    a, b = mj.array(x), mj.array(w)
    expected = _numpy_chain(x, w, 4)
    first = (a @ b).relu()
    second = (first @ b).relu()       # held by a Var
    third = (second @ b).relu()
    pending = second * 3.0            # another graph reads it and is not synced with this one
    fourth = (third @ b).relu()
    mj.sync(fourth)
    assert_close(fourth.numpy(), expected[4], rtol=1e-4, atol=1e-3)
    assert_close(second.numpy(), expected[2], rtol=1e-4, atol=1e-3)
    assert_close(pending.numpy(), expected[2] * 3.0, rtol=1e-4, atol=1e-3)
    del first  # dropped by Python before anyone read it: recomputed from its inputs if needed, never garbage
    assert_close(third.numpy(), expected[3], rtol=1e-4, atol=1e-3)


def test_intermediate_held_as_a_leaf_gradient_survives():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    w = mj.array(rng.standard_normal((32, 16)).astype(np.float32), requires_grad=True)
    loss = ((mj.array(x) @ w).tanh() ** 2).sum()
    loss.backward()
    mj.sync(loss, w.grad)
    hidden = np.tanh(x @ w.numpy())
    expected = x.T @ (2 * hidden * (1 - hidden ** 2))
    assert_close(w.grad.numpy(), expected, rtol=1e-4, atol=1e-4)


def _mlp_step(retain_graph, seed=3):
    rng = np.random.default_rng(seed)
    x = mj.array(rng.standard_normal((512, 256)).astype(np.float32))
    weights = [mj.array((rng.standard_normal((256, 256)) / 16).astype(np.float32), requires_grad=True)
               for _ in range(6)]
    mj.sync(x, *weights)

    def run():
        h = x
        for weight in weights:
            h = (h @ weight).tanh()
        loss = (h * h).mean()
        loss.backward(retain_graph=retain_graph)
        mj.sync(loss, *[weight.grad for weight in weights])
        return loss
    return x, weights, _peak_of(run)


@cpu_backend  # host allocator peaks (test_cuda_execution.py checks the CUDA runner's early release)
def test_backward_frees_the_forward_values_once_computed():
    _, _, (_, kept_peak, _) = _mlp_step(retain_graph=True)
    x, weights, (loss, freed_peak, _) = _mlp_step(retain_graph=False)
    # The same gradients either way, checked against numpy.
    h = [x.numpy()]
    for weight in weights:
        h.append(np.tanh(h[-1] @ weight.numpy()))
    assert_close(loss.numpy(), np.mean(h[-1] * h[-1]), rtol=1e-5)
    upstream = 2 * h[-1] / h[-1].size
    for index in reversed(range(len(weights))):
        upstream = upstream * (1 - h[index + 1] ** 2)
        assert_close(weights[index].grad.numpy(), h[index].T @ upstream, rtol=1e-3, atol=1e-6)
        upstream = upstream @ weights[index].numpy().T
    # Six 512 KB activations: with retain_graph they all live until the end of the run.
    assert freed_peak < kept_peak, (freed_peak, kept_peak)


def test_second_backward_after_the_values_are_freed_names_the_op():
    rng = np.random.default_rng(4)
    w = mj.array(rng.standard_normal((8, 8)).astype(np.float32), requires_grad=True)
    loss = (w.exp() * 2.0).sum()
    loss.backward()
    mj.sync(loss, w.grad)
    with pytest.raises(RuntimeError, match=r"retain_graph=True.*") as error:
        loss.backward()
    assert "test_buffer_lifetimes.py" in str(error.value)


def test_retain_graph_allows_a_second_backward():
    rng = np.random.default_rng(5)
    values = rng.standard_normal((8, 8)).astype(np.float32)
    w = mj.array(values, requires_grad=True)
    loss = (w.exp() * 2.0).sum()
    loss.backward(retain_graph=True)
    mj.sync(loss, w.grad)
    loss.backward()
    assert_close(w.grad.numpy(), 4.0 * np.exp(values), rtol=1e-5)


def test_mj_grad_never_frees_the_graph():
    rng = np.random.default_rng(6)
    values = rng.standard_normal(16).astype(np.float32)
    x = mj.array(values, requires_grad=True)
    y = (x.sin() * x).sum()
    first = mj.grad(y, x)
    mj.sync(y, first)
    second = mj.grad(y, x)
    expected = np.cos(values) * values + np.sin(values)
    assert_close(first.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert_close(second.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_convolution_training_matches_numpy_reference_with_buffers_reused():
    """Library calls keep copies of inputs keyed by address; a buffer released mid-run and reused at the same
    address must not be served a stale copy. Two conv layers over many steps of one plan reuse addresses."""
    F = mj.nn.functional
    rng = np.random.default_rng(7)
    images = rng.standard_normal((4, 3, 12, 12)).astype(np.float32)
    first = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) / 5
    second = rng.standard_normal((8, 8, 3, 3)).astype(np.float32) / 8
    w1, w2 = mj.array(first, requires_grad=True), mj.array(second, requires_grad=True)
    x = mj.array(images)
    losses = []
    for _ in range(3):
        hidden = F.relu(F.conv2d(x, w1, padding=1))
        loss = (F.conv2d(hidden, w2, padding=1) ** 2).mean()
        loss.backward()
        mj.sync(loss, w1.grad, w2.grad)
        losses.append(float(loss.numpy()))
        grads = (w1.grad.numpy().copy(), w2.grad.numpy().copy())
        w1.grad = None
        w2.grad = None
    assert losses[0] == losses[1] == losses[2]

    def conv(inputs, weights):
        padded = np.pad(inputs, ((0, 0), (0, 0), (1, 1), (1, 1)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # N C H W 3 3
        return np.einsum("nchwij,ocij->nohw", windows, weights)

    hidden = np.maximum(conv(images, first), 0)
    out = conv(hidden, second)
    assert_close(np.float32(losses[0]), np.mean(out ** 2), rtol=1e-4)
    d_out = 2 * out / out.size
    padded_hidden = np.pad(hidden, ((0, 0), (0, 0), (1, 1), (1, 1)))
    hidden_windows = np.lib.stride_tricks.sliding_window_view(padded_hidden, (3, 3), axis=(2, 3))
    assert_close(grads[1], np.einsum("nchwij,nohw->ocij", hidden_windows, d_out), rtol=1e-3, atol=1e-5)


def test_reading_the_loss_before_the_gradients_keeps_what_they_need():
    """The usual loop prints loss.item() between backward() and optimizer.step(): that sync computes the forward
    values, and the gradients (still pending) must find them there."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((32, 16)).astype(np.float32)
    w_values = rng.standard_normal((16, 8)).astype(np.float32) / 4
    w = mj.array(w_values, requires_grad=True)
    hidden = (mj.array(x) @ w).sigmoid()
    loss = (hidden * hidden).sum()
    loss.backward()
    expected_hidden = 1 / (1 + np.exp(-(x @ w_values)))
    assert_close(np.float32(loss.item()), np.sum(expected_hidden ** 2), rtol=1e-5)
    expected = x.T @ (2 * expected_hidden * expected_hidden * (1 - expected_hidden))
    assert_close(w.grad.numpy(), expected, rtol=1e-4, atol=1e-5)


def test_a_sync_that_fails_midway_can_be_run_again():
    """Buffers released before a kernel fails are unreachable from anything still pending: syncing the same
    targets again (here with the NaN check off) computes them from the values that were kept."""
    rng = np.random.default_rng(9)
    x, w = _chain_inputs(rng)
    a, b = mj.array(x), mj.array(w)
    y = a
    for _ in range(4):
        y = (y @ b).relu()
    bad = (y - 1e30 * 1e30).exp() - y.log()  # NaN where y is 0: the last kernel fails under check_nan
    out = bad.sum(1)
    with flag_set("check_nan", True):
        with pytest.raises(mj.NonFiniteError):
            mj.sync(out)
    values = _numpy_chain(x, w, 4)[-1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        expected = (np.exp(values - np.float32(1e30) * np.float32(1e30)) - np.log(values)).sum(1)
    assert_close(out, expected.astype(np.float32), rtol=1e-4, atol=1e-3, equal_nan=True)
    assert_close(y, values, rtol=1e-4, atol=1e-3)
