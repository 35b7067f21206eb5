"""Python numbers that change from step to step at one place (meta_ops/scalar_sites.h): compiled in as constants
until the place passes another value, kernel inputs from then on, so a hand-written schedule compiles its
kernels once more and then never again. Values are checked against numpy at every step; compile counts come
from mj.stats()."""
import numpy as np

import metajit as mj
from metajit import nn


def test_a_hand_written_learning_rate_schedule_compiles_its_kernels_once():
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((16, 4)).astype(np.float32)
    inputs = rng.standard_normal((32, 16)).astype(np.float32)
    targets = rng.standard_normal((32, 4)).astype(np.float32)
    parameter = mj.array(weight, requires_grad=True)
    x, y = mj.array(inputs), mj.array(targets)
    expected = weight.astype(np.float64)
    new_kernels = []
    for step in range(8):
        learning_rate = 0.1 * 0.5 ** step  # a decay written by hand, a new Python float every step
        before = mj.stats()["kernels_compiled"] + mj.stats()["kernels_loaded_from_disk"]
        loss = ((x @ parameter - y) ** 2).mean()
        loss.backward()
        with mj.no_grad():
            parameter -= learning_rate * parameter.grad
        parameter.grad = None
        parameter.sync()
        new_kernels.append(mj.stats()["kernels_compiled"] + mj.stats()["kernels_loaded_from_disk"] - before)
        gradient = 2 * inputs.T.astype(np.float64) @ (inputs @ expected - targets) / targets.size
        expected = expected - learning_rate * gradient
        np.testing.assert_allclose(parameter.numpy(), expected, rtol=1e-4, atol=1e-5)
    # Step 1 compiles the update with the rate as an input; from step 2 on nothing new is compiled or loaded.
    assert new_kernels[2:] == [0] * 6, new_kernels


def test_a_number_that_stays_the_same_stays_a_constant():
    x = mj.array(np.arange(6, dtype=np.float32))
    before = mj.stats()["dynamic_scalar_sites"]
    for _ in range(4):
        np.testing.assert_array_equal((x * 3.0 + 1.0).numpy(), np.arange(6, dtype=np.float32) * 3 + 1)
    assert mj.stats()["dynamic_scalar_sites"] == before


def test_layers_with_their_own_constants_do_not_turn_dynamic():
    """Every BatchNorm layer runs the same library line with its own element count, within one step: each use
    is its own place, so no place sees two values and every step after the first compiles nothing."""
    mj.seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(64, 3))
    optimizer = mj.optim.SGD(model.parameters(), lr=0.1)
    images = mj.array(np.random.default_rng(1).standard_normal((8, 1, 8, 8)).astype(np.float32))
    labels = mj.array(np.arange(8) % 3)
    compiled, sites = [], []
    for _ in range(3):
        before = mj.stats()["kernels_compiled"] + mj.stats()["kernels_loaded_from_disk"]
        optimizer.step(nn.functional.cross_entropy(model(images), labels))
        compiled.append(mj.stats()["kernels_compiled"] + mj.stats()["kernels_loaded_from_disk"] - before)
        sites.append(mj.stats()["dynamic_scalar_sites"])
    # Library lines this process ran for earlier programs may have turned dynamic in the first step (their
    # numbers differ between programs); within this program's steps nothing does.
    assert compiled[1:] == [0, 0], compiled
    assert sites[1] == sites[2], sites


def test_dynamic_numbers_keep_every_operators_value_and_dtype():
    """Each operator, side and dtype once with a constant and then with changing numbers: the results equal
    numpy's (PyTorch's scalar rule: the tensor's dtype unless the number is of a higher category)."""
    data = np.array([1.5, -2.0, 3.25, 0.5], np.float32)
    integers = np.array([7, -3, 12, 0], np.int64)
    halves = data.astype(np.float16)
    for number in (2.0, 0.75, -1.25, 3.0):
        x, n, h = mj.array(data), mj.array(integers), mj.array(halves)
        np.testing.assert_array_equal((x * number).numpy(), data * np.float32(number))
        np.testing.assert_array_equal((number / x).numpy(), np.float32(number) / data)
        np.testing.assert_array_equal((x > number).numpy(), data > np.float32(number))
        result = n * number  # an int64 tensor times a float: float32
        assert result.dtype == "float32"
        np.testing.assert_array_equal(result.numpy(), integers.astype(np.float32) * np.float32(number))
        np.testing.assert_allclose((h + number).numpy().astype(np.float32),
                                   (halves + np.float16(number)).astype(np.float32), rtol=1e-3)
    for number in (3, -5, 11):
        n = mj.array(integers)
        added = n + number
        assert added.dtype == "int64"
        np.testing.assert_array_equal(added.numpy(), integers + number)
        np.testing.assert_array_equal((number - n).numpy(), number - integers)
        np.testing.assert_array_equal((n // number).numpy(), integers // number)
    assert mj.stats()["dynamic_scalar_sites"] > 0


def test_gradients_flow_through_a_dynamic_number_as_through_a_constant():
    data = np.array([0.5, 1.0, 2.0], np.float32)
    for scale in (1.5, 2.5, -0.5):
        x = mj.array(data, requires_grad=True)
        (x * scale * x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * scale * data, rtol=1e-6)
