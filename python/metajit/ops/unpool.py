"""Max unpooling (max_unpool1d/2d/3d), PyTorch's partial inverse of max pooling: each input value is written at
the flat position (within its channel's output plane) that max_pool*d(return_indices=True) reported, and every
other position is 0. One scatter into a zero plane; the gradient is a gather of the output's gradient at the
same indices (an mj.Function, so an index that overlapping windows report twice passes the gradient to both
inputs, as PyTorch's does, where the scatter's own rule would give it to the last). It must not compute the
indices only to check them: scatter's range check reads indices whose values are already there (as
max_pool's usually are), and nothing else."""
from .. import _core
from .._function import Function
from .conv import _batched, _check_var, _tuple
from .tensor import gather, scatter

__all__ = ["max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _unpool_output_size(input, kernel, stride, padding, output_size):
    """PyTorch's _unpool_output_size: the default size, or output_size (spatial dims, or with N and C in front)
    checked to lie strictly within one stride of the default."""
    spatial = len(kernel)
    default = [(input.shape[-spatial + d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(spatial)]
    if output_size is None:
        sizes = default
    else:
        sizes = [int(extent) for extent in output_size]
        if len(sizes) == spatial + 2:
            sizes = sizes[2:]
        if len(sizes) != spatial:
            raise ValueError(f"output_size should be a sequence containing {spatial} or {spatial + 2} elements, but "
                             f"it has a length of '{len(sizes)}'")
        for d in range(spatial):
            low, high = default[d] - stride[d], default[d] + stride[d]
            if not low < sizes[d] < high:
                raise ValueError(f'invalid output_size "{list(output_size)}" (dim {d} must be between {low} and '
                                 f'{high})')
    for d in range(spatial):
        if sizes[d] < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                             f"output_size[{d}]={sizes[d]}")
    return sizes


class _Unpool(Function):
    """values [N, C, L] scattered at positions [N, C, L] into a zero [N, C, plane]."""

    @staticmethod
    def forward(ctx, values, positions, plane):
        ctx.positions = positions
        zeros = _core.constant([values.shape[0], values.shape[1], plane], values.dtype, 0.0)
        return scatter(zeros, 2, positions, values)

    @staticmethod
    def backward(ctx, grad):
        return gather(grad, 2, ctx.positions), None, None


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, spatial, function):
    _check_var(indices, "indices", function)
    kernel = _tuple(kernel_size, spatial, "kernel_size", function)
    stride = kernel if stride is None else _tuple(stride, spatial, "stride", function)
    padding = _tuple(padding, spatial, "padding", function)
    sizes = _unpool_output_size(input, kernel, stride, padding, output_size)
    input, unbatched = _batched(input, spatial, function)
    if indices.dtype != "int64":
        raise RuntimeError(f"{function}: elements in indices should be type int64 but got: {indices.dtype}")
    if tuple(indices.shape) != tuple(input.shape[-indices.ndim:]) or indices.ndim not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape[1:] if unbatched else input.shape)}) but got indices tensor with "
                           f"shape: {list(indices.shape)}")
    batch, channels = input.shape[0], input.shape[1]
    plane = 1
    for extent in sizes:
        plane *= extent
    values = input.reshape([batch, channels, -1])
    positions = indices.reshape([batch, channels, -1])
    output = _Unpool.apply(values, positions, plane)
    output = output.reshape([batch, channels] + sizes)
    return output.reshape(output.shape[1:]) if unbatched else output


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool1d: [N, C, L_in] (or [C, L_in]) values placed at their indices in a zero
    [N, C, L_out], L_out = (L_in - 1) * stride - 2 * padding + kernel_size unless output_size says otherwise."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool2d: values placed at their flat indices (h * W_out + w), zeros elsewhere."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool3d: values placed at their flat indices ((d * H + h) * W + w)."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")
