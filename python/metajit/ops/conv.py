"""Convolutions (conv1d/2d/3d and their transposes), Jittor's way: one reindex, one multiply, one sum.

The input is reindexed into a patch view of shape [N, O, *output, C/groups, *kernel] in which every output
position sees the input values under its kernel window; padding is simply an index outside the input, which
reads the overflow value 0. The weight is broadcast to the same shape, the two are multiplied and summed over
the last 1 + spatial dimensions. The fuser inlines the reindex and the multiply into the sum's loop, so no
patch buffer is ever written, and the gradients come from the meta-ops' rules (reindex <-> scatter-add,
broadcast <-> sum).

A transposed convolution is the scatter form of a convolution's data gradient: every input position adds
x * w at output i * stride - padding + k * dilation. A gather instead (output o reading input (o + padding -
k * dilation) / stride where that division is exact) evaluated every kernel tap at every output and kept one
in stride^2 of them, and no library takes it: a stride-2 4x4 transposed convolution took 463 ms where the
scatter, lowered to oneDNN, takes a few."""
import numbers

import numpy as np

from .. import _core
from .._core import Var

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]


def _affine(*terms):
    """Renders sum(coefficient * variable) + constant as an index expression; terms are (coefficient, name) pairs
    or plain integers."""
    parts = []
    constant = 0
    for term in terms:
        if isinstance(term, int):
            constant += term
            continue
        coefficient, name = term
        if coefficient == 0:
            continue
        parts.append(name if coefficient == 1 else f"{name}*{coefficient}")
    text = "+".join(parts) if parts else "0"
    if constant > 0:
        text += f"+{constant}"
    elif constant < 0:
        text += f"-{-constant}"
    return text


def _is_integer(value):
    """True for Python and numpy integers, False for bools (which PyTorch rejects as sizes)."""
    if type(value) is int:  # the common case, without the ABC check below (about 1 us each, several per layer)
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _tuple(value, count, name, function):
    """An int or a sequence of `count` ints (a 1-element sequence is repeated), as a list of Python ints."""
    if type(value) is int:
        return [value] * count
    if type(value) is tuple and len(value) == count and all(type(v) is int for v in value):
        return list(value)  # a layer's own stride, padding and dilation: checked when it was built
    if _is_integer(value):
        return [int(value)] * count
    try:
        values = list(value)
    except TypeError:
        raise TypeError(f"{function}: {name} must be an int or a tuple of {count} ints, got {value!r}") from None
    if len(values) == 1:
        values = values * count
    if len(values) != count or not all(_is_integer(v) for v in values):
        raise ValueError(f"{function}: {name} must be an int or a tuple of {count} ints, got {value!r}")
    return [int(v) for v in values]


def _check_var(value, name, function):
    if not isinstance(value, Var):
        raise TypeError(f"{function}: {name} must be a metajit Var, got {type(value).__name__}")


def _batched(input, spatial, function):
    """(input with a batch dimension, whether one was added): PyTorch also accepts unbatched [C, *spatial]."""
    _check_var(input, "input", function)
    if input.ndim == spatial + 1:
        return input.reshape([1] + list(input.shape)), True
    if input.ndim != spatial + 2:
        raise ValueError(f"{function}: expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D (batched) input, got "
                         f"shape {tuple(input.shape)}")
    return input, False


def _check_groups(groups, function):
    if not _is_integer(groups) or groups < 1:
        raise ValueError(f"{function}: groups must be a positive int, got {groups!r}")


def _check_bias(bias, channels, function):
    if bias is None:
        return
    _check_var(bias, "bias", function)
    if list(bias.shape) != [channels]:
        raise ValueError(f"{function}: bias must have shape ({channels},) (one value per output channel), got "
                         f"{tuple(bias.shape)}")


def _add_bias(output, bias, spatial):
    if bias is None:
        return output
    return output + bias.reshape([1, bias.shape[0]] + [1] * spatial)


def _padding(padding, spatial, kernel, stride, dilation, function):
    """[(before, after)] per spatial dim; 'valid' is no padding and 'same' keeps the size at stride 1."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * spatial
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{function}: padding='same' is not supported for strided convolutions "
                                 f"(stride={tuple(stride)})")
            pads = []
            for size, step in zip(kernel, dilation):
                total = step * (size - 1)
                pads.append((total // 2, total - total // 2))  # the extra element goes after, as in PyTorch
            return pads
        raise ValueError(f"{function}: padding must be 'same', 'valid', an int or a tuple of ints, got {padding!r}")
    values = _tuple(padding, spatial, "padding", function)
    if any(v < 0 for v in values):
        raise ValueError(f"{function}: padding must be non-negative, got {padding!r}")
    return [(v, v) for v in values]


def _convolution(input, weight, bias, stride, padding, dilation, groups, spatial, function):
    input, unbatched = _batched(input, spatial, function)
    _check_var(weight, "weight", function)
    if weight.ndim != spatial + 2:
        raise ValueError(f"{function}: weight must be {spatial + 2}-D (out_channels, in_channels/groups, "
                         f"*kernel_size), got shape {tuple(weight.shape)}")
    _check_groups(groups, function)
    stride = _tuple(stride, spatial, "stride", function)
    dilation = _tuple(dilation, spatial, "dilation", function)
    if any(v < 1 for v in stride) or any(v < 1 for v in dilation):
        raise ValueError(f"{function}: stride and dilation must be positive, got stride={tuple(stride)}, "
                         f"dilation={tuple(dilation)}")
    batch, channels = input.shape[0], input.shape[1]
    out_channels, group_channels = weight.shape[0], weight.shape[1]
    kernel = list(weight.shape[2:])
    if out_channels % groups != 0:
        raise ValueError(f"{function}: out_channels ({out_channels}) must be divisible by groups ({groups})")
    if channels != group_channels * groups:
        raise ValueError(f"{function}: expected input with {group_channels * groups} channels (weight "
                         f"{tuple(weight.shape)} with groups={groups}), got {channels} channels (input shape "
                         f"{tuple(input.shape)})")
    _check_bias(bias, out_channels, function)
    pads = _padding(padding, spatial, kernel, stride, dilation, function)
    sizes = []
    for d in range(spatial):
        extent = input.shape[2 + d] + pads[d][0] + pads[d][1]
        window = dilation[d] * (kernel[d] - 1) + 1
        if window > extent:
            raise ValueError(f"{function}: kernel size {tuple(kernel)} (dilation {tuple(dilation)}) is larger than "
                             f"the padded input {tuple(input.shape[2:])} in spatial dimension {d}")
        sizes.append((extent - window) // stride[d] + 1)

    # Patch view [N, O, *output, C/groups, *kernel]: output dims are i2.., the reduced dims follow.
    group_outputs = out_channels // groups
    channel_index = f"i{2 + spatial}"
    if groups > 1:
        channel_index = f"(i1/{group_outputs})*{group_channels}+{channel_index}"
    indexes = ["i0", channel_index]
    for d in range(spatial):
        indexes.append(_affine((stride[d], f"i{2 + d}"), (dilation[d], f"i{3 + spatial + d}"), -pads[d][0]))
    shape = [batch, out_channels] + sizes + [group_channels] + kernel
    patches = _core.reindex(input, shape, indexes, 0.0, [], [])
    weights = _core.broadcast(weight, shape, [0] + list(range(2, 2 + spatial)))
    output = (patches * weights).sum(list(range(2 + spatial, 3 + 2 * spatial)))
    output = _add_bias(output, bias, spatial)
    return output.reshape(output.shape[1:]) if unbatched else output


def _transposed_convolution(input, weight, bias, stride, padding, output_padding, groups, dilation, spatial,
                            function):
    input, unbatched = _batched(input, spatial, function)
    _check_var(weight, "weight", function)
    if weight.ndim != spatial + 2:
        raise ValueError(f"{function}: weight must be {spatial + 2}-D (in_channels, out_channels/groups, "
                         f"*kernel_size), got shape {tuple(weight.shape)}")
    _check_groups(groups, function)
    stride = _tuple(stride, spatial, "stride", function)
    dilation = _tuple(dilation, spatial, "dilation", function)
    if isinstance(padding, str):
        raise ValueError(f"{function}: padding must be an int or a tuple of ints, got {padding!r}")
    padding = _tuple(padding, spatial, "padding", function)
    output_padding = _tuple(output_padding, spatial, "output_padding", function)
    if any(v < 1 for v in stride) or any(v < 1 for v in dilation):
        raise ValueError(f"{function}: stride and dilation must be positive, got stride={tuple(stride)}, "
                         f"dilation={tuple(dilation)}")
    if any(v < 0 for v in padding) or any(v < 0 for v in output_padding):
        raise ValueError(f"{function}: padding and output_padding must be non-negative")
    for d in range(spatial):
        if output_padding[d] >= max(stride[d], dilation[d]):
            raise ValueError(f"{function}: output_padding {tuple(output_padding)} must be smaller than either stride "
                             f"{tuple(stride)} or dilation {tuple(dilation)}")
    batch, channels = input.shape[0], input.shape[1]
    if weight.shape[0] != channels:
        raise ValueError(f"{function}: weight {tuple(weight.shape)} expects {weight.shape[0]} input channels, got "
                         f"{channels} (input shape {tuple(input.shape)})")
    if channels % groups != 0:
        raise ValueError(f"{function}: in_channels ({channels}) must be divisible by groups ({groups})")
    group_channels = channels // groups
    group_outputs = weight.shape[1]
    out_channels = group_outputs * groups
    kernel = list(weight.shape[2:])
    _check_bias(bias, out_channels, function)
    sizes = []
    for d in range(spatial):
        size = ((input.shape[2 + d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (kernel[d] - 1)
                + output_padding[d] + 1)
        if size < 1:
            raise ValueError(f"{function}: the output would be empty in spatial dimension {d} (size {size}); "
                             "padding is too large for this input")
        sizes.append(size)

    # Every input position adds x * w under its kernel window, at output (i * stride - padding + k * dilation):
    # the scatter form of a convolution's data gradient, which the library lowering runs as one (oneDNN's
    # backward-data convolution) and whose own gradients are a convolution and a weight gradient. Products over
    # [N, C, *input, O/groups, *kernel]; window positions outside the output (the cropping by padding) are
    # dropped, and output_padding's extra positions receive nothing (0).
    shape = [batch, channels] + list(input.shape[2:]) + [group_outputs] + kernel
    reduced = list(range(2 + spatial, 3 + 2 * spatial))
    products = (_core.broadcast(input, shape, reduced) *
                _core.broadcast(weight, shape, [0] + list(range(2, 2 + spatial))))
    channel_index = f"i{2 + spatial}"
    if groups > 1:
        channel_index = f"(i1/{group_channels})*{group_outputs}+{channel_index}"
    indexes = ["i0", channel_index]
    for d in range(spatial):
        indexes.append(_affine((stride[d], f"i{2 + d}"), (dilation[d], f"i{3 + spatial + d}"), -padding[d]))
    output = _core.reindex_reduce(products, "add", [batch, out_channels] + sizes, indexes, [], [])
    output = _add_bias(output, bias, spatial)
    return output.reshape(output.shape[1:]) if unbatched else output


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation) of [N, C, L] with weight [O, C/groups, K], as torch.nn.functional."""
    return _convolution(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution of NCHW input with weight [O, C/groups, KH, KW]; padding may be an int, a tuple, 'valid'
    or 'same' (stride 1), as torch.nn.functional.conv2d."""
    return _convolution(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution of NCDHW input with weight [O, C/groups, KD, KH, KW], as torch.nn.functional.conv3d."""
    return _convolution(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 1-D convolution of [N, C, L] with weight [C, O/groups, K] (the gradient of conv1d)."""
    return _transposed_convolution(input, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                                   "conv_transpose1d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 2-D convolution of NCHW input with weight [C, O/groups, KH, KW], as
    torch.nn.functional.conv_transpose2d (output size (H-1)*stride - 2*padding + dilation*(K-1) +
    output_padding + 1)."""
    return _transposed_convolution(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                                   "conv_transpose2d")


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 3-D convolution of NCDHW input with weight [C, O/groups, KD, KH, KW]."""
    return _transposed_convolution(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                                   "conv_transpose3d")
