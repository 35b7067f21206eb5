"""Fractional max pooling (F.fractional_max_pool2d/3d), as PyTorch's (Graham, 2014): windows of kernel_size whose
start positions advance by a pseudo-random mix of floor and ceil of input / output, one sequence per (batch,
channel) plane and spatial dim, drawn from _random_samples in [0, 1).

The start sequence is PyTorch's generate_intervals rule, computed in the input's dtype as PyTorch computes it
(alpha = (input - pool) / (output - 1); start[i] = int((i + u) alpha) - int(u alpha); the last start is
input - pool), so the same _random_samples give the same windows. The windows are a gather at those starts, the
maximum's flat index is the first strict maximum in window order (PyTorch's scan), and the output is a gather at
that index, so the gradient goes to that one element as in PyTorch. Samples this file draws itself come from
metajit's generator and must not be expected to equal PyTorch's."""
import numpy as np

from .. import _core
from .conv import _batched, _tuple
from .tensor import _as_var, cat, gather

__all__ = ["fractional_max_pool2d", "fractional_max_pool3d"]

# The names PyTorch's size errors give each spatial dim, outermost first.
_DIM_NAMES = {2: ("height", "width"), 3: ("time", "height", "width")}
_FUNCTION_NAMES = {2: "fractional_max_pool2d()", 3: "fractional_max_pool3d_out()"}


def _starts(samples, input_size, output_size, pool_size):
    """[N, C, output_size] int64 window starts for the [N, C] samples of one dim (PyTorch's generate_intervals)."""
    batch, channels = samples.shape[0], samples.shape[1]
    last = _core.constant([batch, channels, 1], "int64", input_size - pool_size)
    if output_size == 1:
        return last
    dtype = samples.dtype
    # alpha is rounded to the input's dtype before use, as PyTorch's scalar_t arithmetic does.
    alpha = float(np.array(input_size - pool_size, dtype=dtype) / np.array(output_size - 1, dtype=dtype))
    alpha = _core.constant([], dtype, alpha)
    steps = _core.arange(0.0, float(output_size - 1), 1.0, dtype).reshape([1, 1, output_size - 1])
    sample = samples.unsqueeze(-1)
    starts = _core.cast(((steps + sample) * alpha).floor(), "int64") - _core.cast((sample * alpha).floor(), "int64")
    return cat([starts, last], 2)


def _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, random_samples, spatial):
    function = f"fractional_max_pool{spatial}d"
    input = _as_var(input)
    if output_size is None and output_ratio is None:
        raise ValueError(f"{function} requires specifying either an output_size or an output_ratio")
    if input.ndim not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"{function}: expected {spatial + 1}D or {spatial + 2}D tensor, but got: "
                           f"{list(input.shape)}")
    extents = list(input.shape[-spatial:])
    if output_size is None:
        if spatial == 2 and not isinstance(output_ratio, (int, float)) and len(output_ratio) > 2:
            raise ValueError(f"{function} requires output_ratio to either be a single Int or tuple of Ints.")
        ratios = [output_ratio] * spatial if isinstance(output_ratio, (int, float)) else list(output_ratio)
        output_size = [int(extent * ratio) for extent, ratio in zip(extents, ratios)]
    kernel = _tuple(kernel_size, spatial, "kernel_size", function)
    sizes = _tuple(output_size, spatial, "output_size", function)
    for name, extent, pool, size in zip(_DIM_NAMES[spatial], extents, kernel, sizes):
        if size + pool - 1 > extent:
            raise RuntimeError(f"{_FUNCTION_NAMES[spatial]}: pool {name} {pool} too large relative to input {name} "
                               f"{extent}")
    input, unbatched = _batched(input, spatial, function)
    batch, channels = input.shape[0], input.shape[1]
    if random_samples is None:
        from .. import rand
        random_samples = rand(batch, channels, spatial, dtype=input.dtype)
    random_samples = _as_var(random_samples)
    if random_samples.ndim != 3 or random_samples.shape[0] != batch or random_samples.shape[2] != spatial:
        raise RuntimeError(f"{function}: expected _random_samples of shape [{batch}, {channels}, {spatial}], got "
                           f"{list(random_samples.shape)}")
    if random_samples.shape[1] != channels:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    random_samples = random_samples.detach()
    if random_samples.dtype != input.dtype:
        random_samples = _core.cast(random_samples, input.dtype)

    # Sample k drives spatial dim spatial-1-k for images (width first); volumes take them in dim order.
    sample_of_dim = [spatial - 1 - dim for dim in range(spatial)] if spatial == 2 else list(range(spatial))
    window_positions = None  # [N, C, *sizes, *kernel] flat positions in one channel's plane
    total_rank = 2 + 2 * spatial
    for dim in range(spatial):
        starts = _starts(random_samples[:, :, sample_of_dim[dim]], extents[dim], sizes[dim], kernel[dim])
        offsets = _core.arange(0.0, float(kernel[dim]), 1.0, "int64")
        start_shape = [batch, channels] + [1] * (2 * spatial)
        start_shape[2 + dim] = sizes[dim]
        offset_shape = [1] * total_rank
        offset_shape[2 + spatial + dim] = kernel[dim]
        position = starts.reshape(start_shape) + offsets.reshape(offset_shape)
        window_positions = position if window_positions is None else window_positions * extents[dim] + position
    window_shape = [batch, channels] + sizes + kernel
    window_positions = window_positions.broadcast_to(window_shape)
    plane = 1
    for extent in extents:
        plane *= extent
    window_count = 1
    for extent in kernel:
        window_count *= extent
    flat_input = input.reshape([batch, channels, plane])
    positions = window_positions.reshape([batch, channels, -1])
    windows = gather(flat_input.detach(), 2, positions).reshape([batch, channels] + sizes + [window_count])
    # The first strict maximum in window order (a NaN wins, the last one, as PyTorch's scan `val > max || nan`).
    slots = _core.arange(0.0, float(window_count), 1.0, "int64")
    maxima = windows.amax(-1, keepdim=True)
    is_nan = windows != windows
    any_nan = is_nan.any(-1, keepdim=True)
    hit = _core.where(any_nan, is_nan, windows == maxima)
    first = _core.where(hit, slots, _core.constant([], "int64", window_count)).amin(-1, keepdim=True)
    last_nan = _core.where(is_nan, slots, _core.constant([], "int64", -1)).amax(-1, keepdim=True)
    chosen = _core.where(any_nan, last_nan, first)
    indices = gather(window_positions.reshape([batch, channels] + sizes + [window_count]), -1, chosen).squeeze(-1)
    output = gather(flat_input, 2, indices.reshape([batch, channels, -1])).reshape([batch, channels] + sizes)
    if unbatched:
        output, indices = output.reshape(output.shape[1:]), indices.reshape(indices.shape[1:])
    return (output, indices) if return_indices else output


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Fractional max pooling of [N, C, H, W] (or [C, H, W]) to output_size (or int(input * output_ratio)), with
    windows placed by _random_samples [N, C, 2] (u for width, then height; drawn when not given)."""
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 2)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Fractional max pooling of [N, C, T, H, W] (or [C, T, H, W]), windows placed by _random_samples [N, C, 3]."""
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 3)
