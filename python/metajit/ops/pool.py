"""Pooling (max, average, adaptive average and adaptive max; 1-D, 2-D and 3-D) as reindex + reduce.

The input is reindexed into a window view [N, C, *output, *kernel]: window positions outside the input read
-inf for max pooling and 0 for average pooling, so padding costs nothing. The reduction over the kernel dims
fuses with the reindex into one kernel. Average pooling's gradient comes from the meta-ops' rules. Max
pooling's is PyTorch's (see _gradient_to_maximum): a window's gradient goes to the one element return_indices
names, where the gradient of amax would split it between tied maxima.

Average-pooling divisors depend only on shapes: they are elementwise functions of arange vectors, one per
spatial dimension, which fuse into the same kernel."""
from .. import _core
from .._autograd import is_grad_enabled, no_grad
from .conv import _affine, _batched, _is_integer, _tuple

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d"]

_FLOAT_DTYPES = ("float16", "float32", "float64")


def _unbatch(output, unbatched):
    return output.reshape(output.shape[1:]) if unbatched else output


def _lowest(dtype):
    """The identity of max for `dtype`: -inf for floats, the smallest integer otherwise."""
    if dtype in _FLOAT_DTYPES:
        return float("-inf")
    import numpy as np
    return 0.0 if dtype == "bool" else float(np.iinfo(dtype).min)


def _window_arguments(input, kernel_size, stride, padding, dilation, ceil_mode, spatial, function):
    """Checks the arguments and returns (kernel, stride, padding, dilation, output sizes) as lists."""
    kernel = _tuple(kernel_size, spatial, "kernel_size", function)
    stride = kernel if stride is None or (not _is_integer(stride) and len(stride) == 0) else \
        _tuple(stride, spatial, "stride", function)
    padding = _tuple(padding, spatial, "padding", function)
    dilation = _tuple(dilation, spatial, "dilation", function)
    if any(v < 1 for v in kernel) or any(v < 1 for v in stride) or any(v < 1 for v in dilation):
        raise ValueError(f"{function}: kernel_size, stride and dilation must be positive, got kernel_size="
                         f"{tuple(kernel)}, stride={tuple(stride)}, dilation={tuple(dilation)}")
    if any(p < 0 or p > k // 2 for p, k in zip(padding, kernel)):
        raise ValueError(f"{function}: pad should be at most half of kernel size, but got padding={tuple(padding)} "
                         f"and kernel_size={tuple(kernel)}")
    sizes = []
    for d in range(spatial):
        extent = input.shape[2 + d]
        span = extent + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1 + (stride[d] - 1 if ceil_mode else 0)
        size = span // stride[d] + 1
        # With ceil_mode the last window must still start inside the input or its left padding.
        if ceil_mode and (size - 1) * stride[d] >= extent + padding[d]:
            size -= 1
        if size < 1:
            raise ValueError(f"{function}: input spatial size {tuple(input.shape[2:])} is too small for kernel_size "
                             f"{tuple(kernel)} (dilation {tuple(dilation)}, padding {tuple(padding)}): the output "
                             "would be empty")
        sizes.append(size)
    return kernel, stride, padding, dilation, sizes


def _window_map(input_shape, kernel, stride, padding, dilation, sizes):
    """The window view's shape [N, C, *output, *kernel] and index expressions (into the input)."""
    spatial = len(kernel)
    indexes = ["i0", "i1"] + [_affine((stride[d], f"i{2 + d}"), (dilation[d], f"i{2 + spatial + d}"), -padding[d])
                              for d in range(spatial)]
    return list(input_shape[:2]) + list(sizes) + list(kernel), indexes


def _windows(input, kernel, stride, padding, dilation, sizes, overflow_value):
    """The window view [N, C, *output, *kernel] of input; positions outside it read overflow_value."""
    shape, indexes = _window_map(input.shape, kernel, stride, padding, dilation, sizes)
    return _core.reindex(input, shape, indexes, overflow_value, [], [])


def _tiles_input(input_shape, kernel, stride, padding, dilation, sizes):
    """Whether the windows cover the input exactly once each (U-Net's 2x2 pools): no overlap, gap or padding."""
    return stride == kernel and all(p == 0 for p in padding) and all(d == 1 for d in dilation) and \
        all(size * k == extent for size, k, extent in zip(sizes, kernel, input_shape[2:]))


def _windows_gradient(window_grad, input_shape, kernel, stride, padding, dilation, sizes):
    """The gradient of the window view for `window_grad` [N, C, *output, *kernel]: each element added to the input
    element its slot reads, as the gradient of the view's reindex (a scatter). Windows that tile the input are a
    permute and a reshape away from it, and that gather runs 2-3x faster than the scatter."""
    spatial = len(kernel)
    if _tiles_input(input_shape, kernel, stride, padding, dilation, sizes):
        interleaved = [0, 1] + [axis for d in range(spatial) for axis in (2 + d, 2 + spatial + d)]
        return window_grad.permute(interleaved).reshape(list(input_shape))
    _, indexes = _window_map(input_shape, kernel, stride, padding, dilation, sizes)
    return _core.reindex_reduce(window_grad, "add", list(input_shape), indexes, [], [])


def _kernel_dims(spatial):
    return list(range(2 + spatial, 2 + 2 * spatial))


def _spatial_vector(values, d, spatial):
    """A 1-D Var laid out along spatial dim d of an [N, C, *spatial] tensor (size 1 elsewhere)."""
    shape = [1, 1] + [1] * spatial
    shape[2 + d] = values.shape[0]
    return values.reshape(shape)


def _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, spatial, function):
    input, unbatched = _batched(input, spatial, function)
    kernel, stride, padding, dilation, sizes = _window_arguments(input, kernel_size, stride, padding, dilation,
                                                                 ceil_mode, spatial, function)
    windows = _windows(input, kernel, stride, padding, dilation, sizes, _lowest(input.dtype))
    output = windows.amax(_kernel_dims(spatial))
    differentiable = input.requires_grad and is_grad_enabled()
    if not return_indices and not differentiable:
        return _unbatch(output, unbatched)
    input_shape = list(input.shape)

    def window_view(value, outside):
        return _windows(value, kernel, stride, padding, dilation, sizes, outside)

    def windows_gradient(window_grad):
        return _windows_gradient(window_grad, input_shape, kernel, stride, padding, dilation, sizes)

    indices = _maximum_indices(input_shape, windows, output, window_view) if return_indices else None
    if differentiable:
        output = _gradient_to_maximum(input, windows, output, window_view, windows_gradient)
    if not return_indices:
        return _unbatch(output, unbatched)
    return _unbatch(output, unbatched), _unbatch(indices, unbatched)


def _plane_positions(input_shape):
    """The flat position (h * W + w) of each element within its channel's plane, int64 [1, 1, *spatial], and the
    plane's size."""
    from .. import arange
    extents = list(input_shape[2:])
    count = 1
    for extent in extents:
        count *= extent
    return arange(0, count, 1, "int64").reshape([1, 1] + extents), count


def _maximum_indices(input_shape, windows, output, window_view):
    """For each window, the flat index (within one channel's spatial plane) of its maximum, as PyTorch's
    return_indices: the first of tied maxima, or the last NaN where the window holds any (PyTorch's CPU kernels
    take a NaN whenever they meet one). window_view(positions, count) lays out the int64 position plane like
    `windows`, with `count` outside the input. One reduction ranks the slots: a NaN at p scores 2C + p, a
    maximum 2C - 1 - p, anything else -1; a slot outside the input scores at most C - 1, below any maximum
    inside it, so it wins only a window with no element inside (which a valid padding never makes)."""
    with no_grad():
        positions, count = _plane_positions(input_shape)
        spatial = len(input_shape) - 2
        slot_positions = window_view(positions, count)
        maxima = output.reshape(list(output.shape) + [1] * spatial)
        is_nan = windows != windows
        minus_one = _core.constant([], "int64", -1)
        score = _core.where(is_nan, slot_positions + 2 * count,
                            _core.where(windows == maxima, (2 * count - 1) - slot_positions, minus_one))
        best = score.amax(_kernel_dims(spatial))
        return _core.where(best >= 2 * count, best - 2 * count, (2 * count - 1) - best)


def _gradient_to_maximum(input, windows, output, window_view, windows_gradient):
    """`output` (the pooled maxima) with PyTorch's max-pooling gradient: all of a window's gradient goes to the
    element return_indices names (the gradient of amax would split it between tied maxima). The backward finds
    those elements from the forward's own window view and maxima, so a later in-place write to `input` cannot
    change them: one reduction per window in place of the tie rule's stored mask of every window element and
    its count."""
    input_shape = list(input.shape)
    spatial = len(input_shape) - 2
    for kept in (windows, output):  # read fused by the backward; no reason for a sync to store them
        kept._stop_counting_as_handle()

    def backward(output_grads):
        grad = output_grads[0]
        if grad is None:
            return [None]
        with no_grad():
            winners = _maximum_indices(input_shape, windows, output, window_view)
            positions, count = _plane_positions(input_shape)
            is_winner = window_view(positions, count) == winners.reshape(list(winners.shape) + [1] * spatial)
        expanded = grad.reshape(list(grad.shape) + [1] * spatial)
        return [windows_gradient(_core.where(is_winner, expanded, _core.constant([], grad.dtype, 0.0)))]

    return _core.custom_function([output], [input], backward, "max_pool")[0]


def _window_counts(extent, size, kernel, stride, padding, include_padding):
    """Per-output-position count of window elements along one dim (PyTorch's avg_pool divisor rule): within the
    padded extent if include_padding, else within the input."""
    from .. import arange, maximum, minimum
    start = arange(0, size, 1, "int64") * stride - padding
    end = minimum(start + kernel, extent + padding)
    if include_padding:
        return end - start
    return minimum(end, extent) - maximum(start, 0)


def _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, spatial,
              function):
    input, unbatched = _batched(input, spatial, function)
    kernel, stride, padding, dilation, sizes = _window_arguments(input, kernel_size, stride, padding, 1, ceil_mode,
                                                                 spatial, function)
    windows = _windows(input, kernel, stride, padding, dilation, sizes, 0.0)
    total = windows.sum(_kernel_dims(spatial))
    if total.dtype not in _FLOAT_DTYPES:
        total = _core.cast(total, "float32")
    if divisor_override is not None:
        if not _is_integer(divisor_override) or divisor_override == 0:
            raise ValueError(f"{function}: divisor_override must be a non-zero int, got {divisor_override!r}")
        return _unbatch(total / divisor_override, unbatched)
    divisor = None
    for d in range(spatial):
        counts = _window_counts(input.shape[2 + d], sizes[d], kernel[d], stride[d], padding[d], count_include_pad)
        counts = _spatial_vector(counts, d, spatial)
        divisor = counts if divisor is None else divisor * counts
    return _unbatch(total / _core.cast(divisor, total.dtype), unbatched)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """1-D max pooling of [N, C, L] (or [C, L]); padding reads -inf. As torch.nn.functional.max_pool1d."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1, "max_pool1d")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """2-D max pooling of NCHW (or CHW) input; padding reads -inf; stride defaults to kernel_size. With
    return_indices=True also returns the flat index (h * W + w) of each maximum, as PyTorch."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2, "max_pool2d")


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """3-D max pooling of NCDHW (or CDHW) input, as torch.nn.functional.max_pool3d."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3, "max_pool3d")


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """1-D average pooling of [N, C, L] (or [C, L]), as torch.nn.functional.avg_pool1d."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1, "avg_pool1d")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """2-D average pooling of NCHW (or CHW) input. The divisor counts the padding when count_include_pad (but
    never the part of a ceil_mode window beyond it), as torch.nn.functional.avg_pool2d."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2,
                     "avg_pool2d")


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """3-D average pooling of NCDHW (or CDHW) input, as torch.nn.functional.avg_pool3d."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3,
                     "avg_pool3d")


def _adaptive_sizes(input, output_size, spatial, function):
    if _is_integer(output_size) or output_size is None:
        output_size = [output_size] * spatial
    output_size = list(output_size)
    if len(output_size) != spatial:
        raise ValueError(f"{function}: output_size must have {spatial} entries, got {tuple(output_size)}")
    sizes = []
    for d, size in enumerate(output_size):
        size = input.shape[2 + d] if size is None else size
        if not _is_integer(size) or size < 1:
            raise ValueError(f"{function}: output_size entries must be positive ints (or None), got "
                             f"{tuple(output_size)}")
        sizes.append(int(size))
    return sizes


def _adaptive_window_map(input_shape, sizes):
    """The adaptive window view's shape [N, C, *output, *largest window], index expressions and overflow
    conditions. Output o along a dim of extent I covers [floor(o*I/O), ceil((o+1)*I/O)); the conditions mark the
    slots past a shorter window's end."""
    spatial = len(sizes)
    indexes, conditions, kernel = ["i0", "i1"], [], []
    for d, size in enumerate(sizes):
        extent = input_shape[2 + d]
        output, slot = f"i{2 + d}", f"i{2 + spatial + d}"
        if extent % size == 0:
            # Equal windows with no gaps (a global average pool's one window, or 56 -> 7): plain strided windows,
            # no guard, so a reduction over them walks memory in order (one loop over a whole 56x56 plane).
            length = extent // size
            indexes.append(f"{output}*{length}+{slot}")
            kernel.append(length)
            continue
        start = f"({output}*{extent})/{size}"
        end = f"(({output}+1)*{extent}+{size - 1})/{size}"
        indexes.append(f"{start}+{slot}")
        conditions.append(f"{slot}>={end}-{start}")
        kernel.append(max(((o + 1) * extent + size - 1) // size - (o * extent) // size for o in range(size)))
    return list(input_shape[:2]) + list(sizes) + kernel, indexes, conditions


def _adaptive_windows(input, sizes, overflow_value):
    """Window view [N, C, *output, *largest window] for adaptive pooling (see _adaptive_window_map); window slots
    past a window's end read overflow_value. Also returns, per dim, the window lengths as an int64 Var of length
    O."""
    from .. import arange
    lengths = []
    for d, size in enumerate(sizes):
        extent = input.shape[2 + d]
        if extent % size == 0:
            lengths.append(_core.constant([size], "int64", extent // size))
            continue
        positions = arange(0, size, 1, "int64")
        lengths.append(((positions + 1) * extent + (size - 1)) // size - (positions * extent) // size)
    shape, indexes, conditions = _adaptive_window_map(input.shape, sizes)
    return _core.reindex(input, shape, indexes, overflow_value, conditions, []), lengths


def _adaptive_avg_pool(input, output_size, spatial, function):
    input, unbatched = _batched(input, spatial, function)
    sizes = _adaptive_sizes(input, output_size, spatial, function)
    if all(size == 1 for size in sizes) and input.dtype in _FLOAT_DTYPES:
        # Global average pooling (ResNet's head): one window, the whole map. Its mean records in 2 us where the
        # window view took 16, and runs as the same sum.
        return _unbatch(input.mean(list(range(2, 2 + spatial)), keepdim=True), unbatched)
    windows, lengths = _adaptive_windows(input, sizes, 0.0)
    total = windows.sum(_kernel_dims(spatial))
    if total.dtype not in _FLOAT_DTYPES:
        total = _core.cast(total, "float32")
    divisor = None
    for d, length in enumerate(lengths):
        length = _spatial_vector(length, d, spatial)
        divisor = length if divisor is None else divisor * length
    return _unbatch(total / _core.cast(divisor, total.dtype), unbatched)


def _adaptive_max_pool(input, output_size, return_indices, spatial, function):
    input, unbatched = _batched(input, spatial, function)
    sizes = _adaptive_sizes(input, output_size, spatial, function)
    windows, _ = _adaptive_windows(input, sizes, _lowest(input.dtype))
    output = windows.amax(_kernel_dims(spatial))
    differentiable = input.requires_grad and is_grad_enabled()
    if not return_indices and not differentiable:
        return _unbatch(output, unbatched)
    input_shape = list(input.shape)

    def window_view(value, outside):
        return _adaptive_windows(value, sizes, float(outside))[0]

    def windows_gradient(window_grad):
        _, indexes, conditions = _adaptive_window_map(input_shape, sizes)
        return _core.reindex_reduce(window_grad, "add", input_shape, indexes, conditions, [])

    indices = _maximum_indices(input_shape, windows, output, window_view) if return_indices else None
    if differentiable:
        output = _gradient_to_maximum(input, windows, output, window_view, windows_gradient)
    if not return_indices:
        return _unbatch(output, unbatched)
    return _unbatch(output, unbatched), _unbatch(indices, unbatched)


def adaptive_avg_pool1d(input, output_size):
    """Average pooling of [N, C, L] to length output_size with PyTorch's window rule."""
    return _adaptive_avg_pool(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input, output_size):
    """Average pooling of NCHW input to output_size (an int, or a pair whose None entries keep the input size):
    output o along a dim of extent I averages input [floor(o*I/O), ceil((o+1)*I/O)), as PyTorch."""
    return _adaptive_avg_pool(input, output_size, 2, "adaptive_avg_pool2d")


def adaptive_avg_pool3d(input, output_size):
    """Adaptive average pooling of NCDHW input, as torch.nn.functional.adaptive_avg_pool3d."""
    return _adaptive_avg_pool(input, output_size, 3, "adaptive_avg_pool3d")


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling of [N, C, L] to length output_size with PyTorch's window rule."""
    return _adaptive_max_pool(input, output_size, return_indices, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling of NCHW input to output_size with the windows of adaptive_avg_pool2d."""
    return _adaptive_max_pool(input, output_size, return_indices, 2, "adaptive_max_pool2d")


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Adaptive max pooling of NCDHW input, as torch.nn.functional.adaptive_max_pool3d."""
    return _adaptive_max_pool(input, output_size, return_indices, 3, "adaptive_max_pool3d")
