"""Normalization layers' functions: batch_norm, layer_norm, group_norm (PyTorch semantics).

Each is written as mean and variance reductions plus elementwise arithmetic, so the gradients (through the
statistics too) come from the meta-ops' rules. The variance is the mean of squared deviations from the mean
(two passes, numerically safer than E[x^2] - E[x]^2).

batch_norm in training mode updates the running statistics as PyTorch does in place, through Var.assign, which
computes them at once. Code that wants to stay lazy (nn.BatchNorm) calls batch_norm_with_statistics, which
returns the new running statistics as lazy Vars for the caller to rebind."""
from .. import _core
from .._core import Var
from .conv import _is_integer

__all__ = ["batch_norm", "batch_norm_with_statistics", "layer_norm", "rms_norm", "group_norm", "instance_norm"]

_FLOAT_DTYPES = ("float16", "float32", "float64")


def _check_var(value, name, function):
    if not isinstance(value, Var):
        raise TypeError(f"{function}: {name} must be a metajit Var, got {type(value).__name__}")


def _check_float(input, function):
    if input.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{function}: input must be a floating-point Var, got {input.dtype}")


def _moments(input, dims):
    """(mean, biased variance) over dims, both with keepdim=True."""
    mean = input.mean(dims, keepdim=True)
    deviation = input - mean
    variance = (deviation * deviation).mean(dims, keepdim=True)
    return mean, variance


def _check_channel_vector(value, channels, name, function):
    if value is None:
        return
    _check_var(value, name, function)
    if list(value.shape) != [channels]:
        raise ValueError(f"{function}: {name} must have shape ({channels},) (one value per channel), got "
                         f"{tuple(value.shape)}")


def _channel_shape(input):
    """Shape that lays a per-channel vector along dim 1 of input."""
    return [1, input.shape[1]] + [1] * (input.ndim - 2)


def batch_norm_with_statistics(input, running_mean, running_var, weight=None, bias=None, training=False,
                               momentum=0.1, eps=1e-5):
    """batch_norm that leaves the running statistics alone: returns (output, new_running_mean, new_running_var).

    In training mode the new statistics are (1 - momentum) * running + momentum * batch statistic, with the
    unbiased variance for the running estimate (as PyTorch); they are lazy and detached from the graph. Out of
    training mode (or without running statistics) the given running statistics are returned unchanged."""
    function = "batch_norm"
    _check_var(input, "input", function)
    _check_float(input, function)
    if input.ndim < 2:
        raise ValueError(f"{function}: expected an input of shape [N, C, *], got {tuple(input.shape)}")
    channels = input.shape[1]
    _check_channel_vector(running_mean, channels, "running_mean", function)
    _check_channel_vector(running_var, channels, "running_var", function)
    _check_channel_vector(weight, channels, "weight", function)
    _check_channel_vector(bias, channels, "bias", function)
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{function}: running_mean and running_var must be given together")
    if training:
        if input.numel() // channels <= 1:
            raise ValueError(f"{function}: expected more than 1 value per channel when training, got input size "
                             f"{tuple(input.shape)}")
        if running_mean is not None and momentum is None:
            raise ValueError(f"{function}: momentum=None (a cumulative average) needs the number of batches "
                             "seen; pass a float momentum (nn.BatchNorm handles momentum=None)")
    elif running_mean is None:
        raise ValueError(f"{function}: running_mean and running_var are required when training=False")
    # One call records the 20-odd ops (meta_ops/batch_norm.h): 30-50 us a layer less Python. The statistics are
    # _moments' (two passes); the running variance is unbiased, as PyTorch's.
    output, new_mean, new_var = _core.batch_norm(input, running_mean, running_var, weight, bias, training,
                                                 0.0 if momentum is None else float(momentum), float(eps))
    if not training or running_mean is None:
        return output, running_mean, running_var  # the caller's own Vars, unchanged
    return output, new_mean, new_var


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Batch normalization over all dims but the channel dim 1, as torch.nn.functional.batch_norm.

    training=True normalizes with the batch statistics and, when running_mean/running_var are given, updates
    them in place like PyTorch: the update is an assign, so it is computed now (the output stays lazy). Use
    batch_norm_with_statistics to keep the update lazy."""
    output, new_mean, new_var = batch_norm_with_statistics(input, running_mean, running_var, weight, bias, training,
                                                           momentum, eps)
    if training and running_mean is not None:
        _core.sync_all([new_mean, new_var])  # one plan for both statistics
        running_mean.assign(new_mean)
        running_var.assign(new_var)
    return output


def _trailing_shape(input, normalized_shape, function):
    """normalized_shape (an int or a sequence) as a list, checked against input's trailing dims."""
    if _is_integer(normalized_shape):
        normalized_shape = [normalized_shape]
    normalized_shape = [int(size) for size in normalized_shape]
    count = len(normalized_shape)
    if count == 0 or count > input.ndim or list(input.shape[input.ndim - count:]) != normalized_shape:
        raise ValueError(f"{function}: normalized_shape {tuple(normalized_shape)} must match the trailing dims of the "
                         f"input, whose shape is {tuple(input.shape)}")
    return normalized_shape


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalizes over the trailing dims given by normalized_shape, then applies the elementwise affine weight and
    bias of that shape, as torch.nn.functional.layer_norm."""
    function = "layer_norm"
    _check_var(input, "input", function)
    _check_float(input, function)
    normalized_shape = _trailing_shape(input, normalized_shape, function)
    count = len(normalized_shape)
    for value, name in ((weight, "weight"), (bias, "bias")):
        if value is not None:
            _check_var(value, name, function)
            if list(value.shape) != normalized_shape:
                raise ValueError(f"{function}: {name} must have shape {tuple(normalized_shape)}, got "
                                 f"{tuple(value.shape)}")
    mean, variance = _moments(input, list(range(input.ndim - count, input.ndim)))
    output = (input - mean) * (variance + eps).rsqrt()
    if weight is not None:
        output = output * weight
    if bias is not None:
        output = output + bias
    return output


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """input / sqrt(mean(input^2) + eps) over the trailing dims given by normalized_shape, times the elementwise
    weight, as torch.nn.functional.rms_norm (eps None: the dtype's machine epsilon, as PyTorch)."""
    function = "rms_norm"
    _check_var(input, "input", function)
    _check_float(input, function)
    normalized_shape = _trailing_shape(input, normalized_shape, function)
    count = len(normalized_shape)
    if eps is None:
        import numpy as np
        eps = float(np.finfo(input.dtype).eps)
    dims = list(range(input.ndim - count, input.ndim))
    output = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        _check_var(weight, "weight", function)
        if list(weight.shape) != normalized_shape:
            raise ValueError(f"{function}: weight must have shape {tuple(normalized_shape)}, got {tuple(weight.shape)}")
        output = output * weight
    return output


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalizes [N, C, *] over each group of C/num_groups channels (and all spatial positions), then applies a
    per-channel weight and bias, as torch.nn.functional.group_norm."""
    function = "group_norm"
    _check_var(input, "input", function)
    _check_float(input, function)
    if input.ndim < 2:
        raise ValueError(f"{function}: expected an input of shape [N, C, *], got {tuple(input.shape)}")
    if not _is_integer(num_groups) or num_groups < 1:
        raise ValueError(f"{function}: num_groups must be a positive int, got {num_groups!r}")
    batch, channels = input.shape[0], input.shape[1]
    if channels % num_groups != 0:
        raise ValueError(f"{function}: the number of channels ({channels}) must be divisible by num_groups "
                         f"({num_groups})")
    _check_channel_vector(weight, channels, "weight", function)
    _check_channel_vector(bias, channels, "bias", function)
    grouped = input.reshape([batch, num_groups, input.numel() // max(batch * num_groups, 1)])
    mean, variance = _moments(grouped, [2])
    output = ((grouped - mean) * (variance + eps).rsqrt()).reshape(list(input.shape))
    shape = _channel_shape(input)
    if weight is not None:
        output = output * weight.reshape(shape)
    if bias is not None:
        output = output + bias.reshape(shape)
    return output


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalizes each [N, C] slice of [N, C, *] over its spatial positions (group_norm with one channel per
    group), then a per-channel weight and bias. Running statistics are not kept: with use_input_stats=False the
    given running_mean / running_var are used instead."""
    function = "instance_norm"
    _check_var(input, "input", function)
    _check_float(input, function)
    if input.ndim < 3:
        raise ValueError(f"{function}: expected an input of shape [N, C, *spatial], got {tuple(input.shape)}")
    if use_input_stats:
        return group_norm(input, input.shape[1], weight, bias, eps)
    if running_mean is None or running_var is None:
        raise ValueError(f"{function}: use_input_stats=False needs running_mean and running_var")
    shape = _channel_shape(input)
    output = (input - running_mean.reshape(shape)) * (running_var.reshape(shape) + eps).rsqrt()
    if weight is not None:
        output = output * weight.reshape(shape)
    if bias is not None:
        output = output + bias.reshape(shape)
    return output
