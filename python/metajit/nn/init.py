"""nn.init: PyTorch's parameter initialisers, filling a Var in place (via assign) and returning it.

Random values come from metajit's host generator (seeded by mj.seed) and are scaled on the host, so
initialising a model compiles no kernels (a scale baked into a kernel would make one kernel per layer shape
and bound).
"""
import math

import numpy as np

from .._core import Var

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "ones_", "zeros_", "xavier_uniform_",
           "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "eye_"]


def _check(tensor, function):
    if not isinstance(tensor, Var):
        raise TypeError(f"{function}: expected a metajit Var, got {type(tensor).__name__}")


def _fill(tensor, values):
    """Assigns host values (numpy) to `tensor`, keeping its dtype; no kernel runs."""
    from .. import array
    tensor.assign(array(np.asarray(values).astype(tensor.dtype, copy=False)))
    return tensor


def _uniform_host(shape):
    from .. import rand
    return rand(*shape, dtype="float64").numpy() if len(shape) else rand(1, dtype="float64").numpy().reshape(())


def _normal_host(shape):
    from .. import randn
    return randn(*shape, dtype="float64").numpy() if len(shape) else randn(1, dtype="float64").numpy().reshape(())


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table): 1 for linear/conv/sigmoid, 5/3 for tanh,
    sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu, 3/4 for selu."""
    linear = {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
              "sigmoid"}
    if nonlinearity in linear:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for a tensor with fewer than 2 dimensions "
                         f"(shape {tuple(tensor.shape)})")
    receptive_field = 1
    for extent in tensor.shape[2:]:
        receptive_field *= extent
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills with samples from U(a, b)."""
    _check(tensor, "uniform_")
    return _fill(tensor, a + (b - a) * _uniform_host(tensor.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills with samples from N(mean, std^2)."""
    _check(tensor, "normal_")
    return _fill(tensor, mean + std * _normal_host(tensor.shape))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fills with N(mean, std^2) samples redrawn until they fall in [a, b]."""
    _check(tensor, "trunc_normal_")
    if not a < b:
        raise ValueError(f"trunc_normal_: the bounds must satisfy a < b, got a={a}, b={b}")
    values = mean + std * _normal_host(tensor.shape)
    outside = (values < a) | (values > b)
    for _ in range(1000):
        if not outside.any():
            break
        values[outside] = mean + std * _normal_host((int(outside.sum()),))
        outside = (values < a) | (values > b)
    return _fill(tensor, np.clip(values, a, b))


def constant_(tensor, val):
    _check(tensor, "constant_")
    return _fill(tensor, np.full(tuple(tensor.shape), val))


def ones_(tensor):
    return constant_(tensor, 1)


def zeros_(tensor):
    return constant_(tensor, 0)


def eye_(tensor):
    """Fills a 2-D tensor with the identity matrix."""
    _check(tensor, "eye_")
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only 2-D tensors are supported, got shape {tuple(tensor.shape)}")
    return _fill(tensor, np.eye(*tensor.shape))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    _check(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _check(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan) (fan per `mode`)."""
    _check(tensor, "kaiming_uniform_")
    if 0 in tuple(tensor.shape):
        return tensor
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(_calculate_correct_fan(tensor, mode))
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std^2) with std = gain / sqrt(fan) (fan per `mode`)."""
    _check(tensor, "kaiming_normal_")
    if 0 in tuple(tensor.shape):
        return tensor
    gain = calculate_gain(nonlinearity, a)
    return normal_(tensor, 0.0, gain / math.sqrt(_calculate_correct_fan(tensor, mode)))
