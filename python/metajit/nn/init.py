"""nn.init: PyTorch's parameter initialisers, filling a Var in place (via assign) and returning it.

Random values come from metajit's host generator (seeded by mj.seed) and are scaled on the host, so
initialising a model compiles no kernels (a scale baked into a kernel would make one kernel per layer shape
and bound).
"""
import math
import warnings

import numpy as np

from .._core import Var

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "ones_", "zeros_", "xavier_uniform_",
           "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "eye_", "dirac_",
           "orthogonal_", "sparse_", "uniform", "normal", "constant", "eye", "dirac", "xavier_uniform",
           "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"]


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


def dirac_(tensor, groups=1):
    """Fills a 3-, 4- or 5-D convolution weight with the Dirac delta, so the convolution copies its input
    channels (per group, as many as fit); everything else is zero."""
    _check(tensor, "dirac_")
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    shape = tuple(tensor.shape)
    if shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_channels_per_group = shape[0] // groups
    values = np.zeros(shape)
    centre = tuple(extent // 2 for extent in shape[2:])
    for group in range(groups):
        for channel in range(min(out_channels_per_group, shape[1])):
            values[(group * out_channels_per_group + channel, channel) + centre] = 1
    return _fill(tensor, values)


def orthogonal_(tensor, gain=1, generator=None):
    """Fills with a (semi-)orthogonal matrix times `gain`: the tensor seen as (shape[0], rest) has orthonormal
    rows (or columns, whichever are fewer), from the QR decomposition of a Gaussian matrix with the signs of R's
    diagonal folded into Q so the result is uniformly (Haar) distributed. Computed on the host with numpy."""
    _check(tensor, "orthogonal_")
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    shape = tuple(tensor.shape)
    if 0 in shape:
        return tensor
    rows = shape[0]
    columns = int(np.prod(shape)) // rows
    gaussian = _normal_host((rows, columns))
    # QR needs at least as many rows as columns; a wide matrix is decomposed transposed.
    wide = rows < columns
    q, r = np.linalg.qr(gaussian.T if wide else gaussian)
    q = q * np.sign(np.diag(r))
    if wide:
        q = q.T
    return _fill(tensor, gain * q.reshape(shape))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fills a 2-D tensor with N(0, std^2) samples and then zeroes ceil(sparsity * rows) randomly chosen entries
    of every column."""
    _check(tensor, "sparse_")
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, columns = tuple(tensor.shape)
    zero_count = math.ceil(sparsity * rows)
    values = std * _normal_host((rows, columns))
    # A random permutation per column from argsort of uniform draws (the host generator has no permutation).
    order = np.argsort(_uniform_host((rows, columns)), axis=0)
    np.put_along_axis(values, order[:zero_count], 0.0, axis=0)
    return _fill(tensor, values)


def _deprecated(new_function):
    old_name = new_function.__name__[:-1]

    def deprecated_initialiser(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_function.__name__}`.",
                      FutureWarning, stacklevel=2)
        return new_function(*args, **kwargs)
    deprecated_initialiser.__name__ = old_name
    deprecated_initialiser.__doc__ = f"Deprecated alias of {new_function.__name__} (warns, as PyTorch's does)."
    return deprecated_initialiser


# PyTorch's old names without the trailing underscore: they still work there, with a FutureWarning.
uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)


def __getattr__(name):
    """A torch.nn.init name metajit lacks: an AttributeError that names it."""
    from .._absent import absent_name
    raise absent_name(name, "metajit.nn.init", "torch.nn.init")
