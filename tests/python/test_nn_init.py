"""nn.init: gains equal torch's, each initialiser fills in place with the right distribution (bounds and sample
standard deviations against the formulas PyTorch documents), seeding is reproducible and no kernel is compiled."""
import math

import numpy as np
import pytest
import torch

import metajit as mj
from metajit import nn
from metajit.nn import init


@pytest.mark.parametrize("nonlinearity,param", [("linear", None), ("conv2d", None), ("sigmoid", None),
                                                ("tanh", None), ("relu", None), ("leaky_relu", None),
                                                ("leaky_relu", 0.2), ("selu", None)])
def test_calculate_gain_matches_torch(nonlinearity, param):
    assert init.calculate_gain(nonlinearity, param) == pytest.approx(torch.nn.init.calculate_gain(nonlinearity,
                                                                                                   param))


def fan_bound_cases():
    return [
        ("xavier_uniform_", dict(gain=2.0), lambda fan_in, fan_out: 2.0 * math.sqrt(6 / (fan_in + fan_out)), True),
        ("kaiming_uniform_", dict(a=math.sqrt(5)), lambda fan_in, fan_out: 1 / math.sqrt(fan_in), True),
        ("kaiming_uniform_", dict(mode="fan_out", nonlinearity="relu"),
         lambda fan_in, fan_out: math.sqrt(6 / fan_out), True),
        ("xavier_normal_", dict(), lambda fan_in, fan_out: math.sqrt(2 / (fan_in + fan_out)), False),
        ("kaiming_normal_", dict(mode="fan_out", nonlinearity="relu"),
         lambda fan_in, fan_out: math.sqrt(2 / fan_out), False),
    ]


@pytest.mark.parametrize("name,options,scale,uniform", fan_bound_cases())
def test_fan_based_initialisers(name, options, scale, uniform):
    tensor = mj.zeros(64, 32, 3, 3)
    fan_in, fan_out = 32 * 9, 64 * 9
    before = mj.stats()["kernels_compiled"]
    assert getattr(init, name)(tensor, **options) is tensor
    assert mj.stats()["kernels_compiled"] == before  # filled from host values
    values = tensor.numpy()
    expected = scale(fan_in, fan_out)
    if uniform:
        assert np.abs(values).max() <= expected and np.abs(values).max() > 0.99 * expected
        np.testing.assert_allclose(values.std(), expected / math.sqrt(3), rtol=0.03)
    else:
        np.testing.assert_allclose(values.std(), expected, rtol=0.03)
    assert abs(values.mean()) < 0.03 * expected


def test_simple_fills_and_dtypes():
    tensor = mj.zeros(3, 4, dtype="float64")
    init.uniform_(tensor, -2.0, -1.0)
    assert tensor.dtype == "float64" and (tensor.numpy() >= -2).all() and (tensor.numpy() < -1).all()
    init.normal_(tensor, mean=5.0, std=0.01)
    assert abs(tensor.numpy().mean() - 5.0) < 0.05
    init.constant_(tensor, 0.25)
    assert (tensor.numpy() == 0.25).all()
    init.ones_(tensor)
    assert (tensor.numpy() == 1).all()
    init.zeros_(tensor)
    assert not tensor.numpy().any()
    init.eye_(tensor)
    np.testing.assert_array_equal(tensor.numpy(), np.eye(3, 4))
    init.trunc_normal_(tensor, std=3.0, a=-1.0, b=1.0)
    assert (np.abs(tensor.numpy()) <= 1).all()
    parameter = nn.Parameter(mj.zeros(2, 2))
    init.ones_(parameter)
    assert isinstance(parameter, nn.Parameter) and parameter.requires_grad


def test_seeded_initialisation_is_reproducible():
    mj.seed(11)
    first = nn.Linear(4, 3)
    mj.seed(11)
    second = nn.Linear(4, 3)
    np.testing.assert_array_equal(first.weight.numpy(), second.weight.numpy())
    np.testing.assert_array_equal(first.bias.numpy(), second.bias.numpy())
    assert not np.array_equal(first.weight.numpy(), nn.Linear(4, 3).weight.numpy())


def test_errors():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(mj.zeros(5))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(mj.zeros(2, 2), mode="fan_avg")
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(TypeError, match="expected a metajit Var"):
        init.zeros_(np.zeros(3))
