"""Kernels with several outputs (jit/sibling_kernels.cc): stored elementwise values of one shape that share
inputs, read each other at their own index, or are small, are computed by one kernel that stores each of them.
Every test compares with numpy and with mj.flags.multiple_outputs off (one kernel per stored value)."""
import numpy as np
import pytest

import metajit as mj
from conftest import flag_set, launched


def multiple_outputs(enabled):
    return flag_set("multiple_outputs", enabled)


def _both_ways(build):
    """(values, kernels launched) of syncing build()'s Vars with the flag on, then off."""
    results = {}
    for enabled in (True, False):
        with multiple_outputs(enabled):
            outputs = build()
            _, kernels = launched(lambda: mj.sync(*outputs))
            results[enabled] = ([output.numpy() for output in outputs], kernels)
    return results


def test_momentum_update_stores_velocity_and_weight_in_one_kernel(rng):
    """The weight's update reads the new velocity at its own index: the joined kernel keeps it in a register
    instead of storing it and loading it back in a second kernel."""
    shape = (300, 200)
    weight, velocity, grad = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))

    def build():
        new_velocity = mj.array(velocity) * 0.9 + mj.array(grad)
        return [mj.array(weight) - new_velocity * 0.1, new_velocity]

    results = _both_ways(build)
    expected_velocity = velocity.astype(np.float64) * 0.9 + grad
    for enabled in (True, False):
        new_weight, new_velocity = results[enabled][0]
        np.testing.assert_allclose(new_velocity, expected_velocity, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(new_weight, weight - expected_velocity * 0.1, rtol=1e-6, atol=1e-6)
    assert results[True][1] == 1 and results[False][1] == 2
    np.testing.assert_array_equal(results[True][0][0], results[False][0][0])  # same rounding either way


def test_values_sharing_an_input_share_a_kernel_and_its_loads(rng):
    data = rng.standard_normal((256, 512)).astype(np.float32)
    other = rng.standard_normal((256, 512)).astype(np.float32)
    x, y = mj.array(data), mj.array(other)
    outputs = [(x * y).sin(), (x * y).cos() + 1.0, x.exp()]
    kernels = mj.inspect(*outputs, device="cpu")
    assert len(kernels) == 1
    source = kernels[0].source
    assert "out2" in source and "in1" in source and "in2" not in source  # three outputs, two inputs
    results = _both_ways(lambda: [(x * y).sin(), (x * y).cos() + 1.0, x.exp()])
    product = data.astype(np.float64) * other
    expected = [np.sin(product), np.cos(product) + 1.0, np.exp(data.astype(np.float64))]
    for enabled in (True, False):
        for value, reference in zip(results[enabled][0], expected):
            np.testing.assert_allclose(value, reference, rtol=1e-5, atol=1e-6)
    assert results[True][1] == 1 and results[False][1] == 3


def test_an_output_read_at_another_index_keeps_its_own_kernel(rng):
    """The second value reads the first shifted by one row: another thread may still be writing that row, so
    they cannot share a kernel."""
    data = rng.standard_normal((64, 128)).astype(np.float32)

    def build():
        x = mj.array(data)
        first = x * 2.0 + 1.0
        shifted = mj.cat([first[1:], first[:1]], 0)
        return [first, shifted * x]

    results = _both_ways(build)
    first = data.astype(np.float64) * 2 + 1
    expected_second = np.concatenate([first[1:], first[:1]], 0) * data
    for enabled in (True, False):
        np.testing.assert_allclose(results[enabled][0][0], first, rtol=1e-6)
        np.testing.assert_allclose(results[enabled][0][1], expected_second, rtol=1e-6)
    assert results[True][1] == results[False][1] == 2


def test_a_kernel_reading_an_output_in_between_keeps_the_outputs_apart(rng):
    """first -> total (a reduction of first) -> second (reads total and first's input): a joined kernel would
    run where `second` does, after `total` needed `first`."""
    data = rng.standard_normal((128, 64)).astype(np.float32)

    def build():
        x = mj.array(data)
        first = x.exp()
        total = first.sum()
        return [first, x * total, total]

    results = _both_ways(build)
    first = np.exp(data.astype(np.float64))
    for enabled in (True, False):
        values = results[enabled][0]
        np.testing.assert_allclose(values[0], first, rtol=1e-6)
        np.testing.assert_allclose(values[1], data * first.sum(), rtol=1e-5)
    assert results[True][1] == results[False][1] == 3


def test_unrelated_values_join_only_when_small(rng):
    small = [mj.array(rng.standard_normal((16, 32)).astype(np.float32)) for _ in range(2)]
    large = [mj.array(rng.standard_normal((512, 512)).astype(np.float32)) for _ in range(2)]
    assert len(mj.inspect(small[0].exp(), small[1].tanh(), device="cpu")) == 1  # a launch saved
    assert len(mj.inspect(large[0].exp(), large[1].tanh(), device="cpu")) == 2  # nothing shared to save
    assert len(mj.inspect(small[0].exp(), mj.array(np.ones((32, 16), np.float32)).exp(), device="cpu")) == 2
    # Sharing only a scalar (every parameter's update reads the learning rate) saves nothing.
    rate = mj.array(np.float32(0.1))
    assert len(mj.inspect(large[0] * rate, large[1] * rate, device="cpu")) == 2


def test_the_flag_is_part_of_the_plan_cache_key(rng):
    data = rng.standard_normal((50, 60)).astype(np.float32)
    x = mj.array(data)
    counts = []
    for enabled in (True, False, True):
        with multiple_outputs(enabled):
            a, b = x.sin(), x.cos()
            _, kernels = launched(lambda: mj.sync(a, b))
            counts.append(kernels)
            np.testing.assert_allclose(a.numpy(), np.sin(data), rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(b.numpy(), np.cos(data), rtol=1e-6, atol=1e-7)
    assert counts == [1, 2, 1]


def test_check_nan_names_the_output_that_holds_the_nan(rng):
    data = np.abs(rng.standard_normal((40, 40)).astype(np.float32)) + 0.5
    data[3, 7] = -1.0
    x = mj.array(data)
    with flag_set("check_nan", True), multiple_outputs(True):
        fine, broken = x * 2.0, x.sqrt()  # sqrt(-1) at [3, 7]
        assert len(mj.inspect(fine, broken, device="cpu")) == 1
        with pytest.raises(mj.NonFiniteError, match=r"sqrt \[40, 40\].*NaN at flat index 127"):
            mj.sync(fine, broken)


def test_lstm_training_step_matches_with_and_without_joined_kernels(rng):
    """Gradients of a 12-step LSTM: its step kernels store gates, cell and hidden state, and its backward the
    gate gradients; both plans must give the same numbers."""
    inputs = rng.standard_normal((12, 4, 16)).astype(np.float32)
    gradients = {}
    for enabled in (True, False):
        with multiple_outputs(enabled):
            mj.seed(3)
            lstm = mj.nn.LSTM(16, 24)
            output, (hidden, cell) = lstm(mj.array(inputs))
            loss = (output * output).mean() + hidden.sum() * 0.1 + cell.sum() * 0.2
            loss.backward()
            gradients[enabled] = [parameter.grad.numpy() for parameter in lstm.parameters()]
    for joined, separate in zip(gradients[True], gradients[False]):
        np.testing.assert_allclose(joined, separate, rtol=1e-6, atol=1e-7)


def test_profile_names_the_further_outputs(rng):
    x = mj.array(rng.standard_normal((32, 32)).astype(np.float32))
    with multiple_outputs(True), mj.profile() as report:
        mj.sync(x.sin(), x.cos(), x.exp())
    assert "(and 2 more outputs)" in str(report)
