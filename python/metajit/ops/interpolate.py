"""Resampling (torch.nn.functional.interpolate): nearest, nearest-exact, (bi/tri)linear and area modes.

Every output position reads the input at source indices that depend only on the shapes; they are computed as
small int64 Vars from arange vectors (elementwise ops, with PyTorch's float arithmetic and coordinate rules)
and passed to a reindex as extra inputs. Linear modes blend the 2^d neighbouring samples with per-dim weights
computed the same way. The input gradient is therefore the scatter-add (reindex_reduce) of the meta-ops' rule.
'area' is adaptive average pooling, as in PyTorch."""
import math
import numbers

from .. import _core
from .._core import Var
from .conv import _is_integer

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]

_FLOAT_DTYPES = ("float16", "float32", "float64")
_LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area")


def _float32(value):
    """`value` rounded to float32 (as a Python float), for index arithmetic that PyTorch does in float."""
    import numpy as np
    return float(np.float32(value))


def _output_sizes(input, size, scale_factor, recompute_scale_factor, spatial):
    """(output sizes, scales to use in the coordinate maps or None per dim)."""
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    extents = list(input.shape[2:])
    if size is not None:
        sizes = [size] * spatial if _is_integer(size) else list(size)
        if len(sizes) != spatial:
            raise ValueError(f"interpolate: input has {spatial} spatial dims (shape {tuple(input.shape)}) but size has "
                             f"{len(sizes)} entries: {tuple(sizes)}")
        if any(not _is_integer(s) or s < 1 for s in sizes):
            raise ValueError(f"interpolate: size entries must be positive ints, got {tuple(sizes)}")
        return [int(s) for s in sizes], [None] * spatial
    factors = [scale_factor] * spatial if isinstance(scale_factor, numbers.Real) else list(scale_factor)
    if len(factors) != spatial:
        raise ValueError(f"interpolate: input has {spatial} spatial dims (shape {tuple(input.shape)}) but "
                         f"scale_factor has {len(factors)} entries: {tuple(factors)}")
    if any(isinstance(f, bool) or not isinstance(f, numbers.Real) or not f > 0 for f in factors):
        raise ValueError(f"interpolate: scale_factor entries must be positive numbers, got {tuple(factors)}")
    sizes = [int(math.floor(float(extent) * factor)) for extent, factor in zip(extents, factors)]
    if any(s < 1 for s in sizes):
        raise ValueError(f"interpolate: scale_factor {tuple(factors)} gives an empty output for input "
                         f"{tuple(input.shape)}")
    scales = [None] * spatial if recompute_scale_factor else [float(f) for f in factors]
    return sizes, scales


def _nearest_indices(extent, size, scale, exact):
    """int64 Var of source indices along one dim (PyTorch's nearest_idx / nearest_exact_idx, float32 scale)."""
    from .. import arange, minimum
    positions = arange(0, size, 1, "int64")
    if not exact:
        if size == extent:
            return positions
        if size == 2 * extent:
            return positions // 2
    ratio = _float32(1.0 / scale if scale is not None else _float32(extent) / _float32(size))
    if exact:
        # (dst + 0.5) * scale is evaluated in double, then floored as a float.
        source = (_core.cast(positions, "float64") + 0.5) * ratio
        source = _core.cast(source, "float32").floor()
    else:
        source = (_core.cast(positions, "float32") * ratio).floor()
    return minimum(_core.cast(source, "int64"), extent - 1)


def _linear_corners(extent, size, scale, align_corners, dtype):
    """[(index Var, weight Var or None)] for one dim: one corner when it is a copy, else the two neighbours."""
    from .. import arange, minimum, maximum
    positions = arange(0, size, 1, "int64")
    if size == extent:
        return [(positions, None)]
    # area_pixel_compute_scale, in the input's arithmetic type (float for float16/float32, double for float64).
    opmath = "float64" if dtype == "float64" else "float32"
    narrow = _float32 if opmath == "float32" else float
    if align_corners:
        ratio = narrow(narrow(extent - 1) / (size - 1)) if size > 1 else 0.0
    elif scale is not None:
        ratio = narrow(1.0 / scale)
    else:
        ratio = narrow(narrow(extent) / narrow(size))
    coordinates = _core.cast(positions, opmath)
    if align_corners:
        source = coordinates * ratio
    else:
        source = maximum((coordinates + 0.5) * ratio - 0.5, 0.0)  # negative sources clamp to 0
    low = minimum(_core.cast(source.floor(), "int64"), extent - 1)
    high = minimum(low + 1, extent - 1)
    upper_weight = minimum(maximum(source - _core.cast(low, opmath), 0.0), 1.0)
    lower_weight = 1.0 - upper_weight
    return [(low, _core.cast(lower_weight, dtype)), (high, _core.cast(upper_weight, dtype))]


def _gather(input, sizes, indices):
    """input[n, c, indices[0][o0], indices[1][o1], ...] as one reindex with the index vectors as extras."""
    spatial = len(sizes)
    expressions = ["i0", "i1"] + [f"@e{d}(i{2 + d})" for d in range(spatial)]
    return _core.reindex(input, list(input.shape[:2]) + list(sizes), expressions, 0.0, [], list(indices))


def _resample_dim(input, dim, size, corners):
    """One linear pass: `input` resampled along spatial dim `dim` to `size`, the other dims unchanged."""
    rank = input.ndim
    axis = 2 + dim
    shape = list(input.shape)
    shape[axis] = size
    expressions = [f"i{d}" for d in range(rank)]
    expressions[axis] = f"@e0(i{axis})"
    total = None
    for index, weight in corners:
        term = _core.reindex(input, shape, expressions, 0.0, [], [index])
        if weight is not None:
            weight_shape = [1] * rank
            weight_shape[axis] = size
            term = weight.reshape(weight_shape) * term
        total = term if total is None else total + term
    return total


def _blend(input, sizes, corners):
    """Linear resampling as one pass per resized dim, the last dim first. PyTorch blends in the same order (the
    columns of each row, then the rows), so the rounding is the same; and the passes over outer dims read the
    last-dim pass at whole rows, with plain loads, where one fused kernel would gather every corner separately
    (the planner stores the last-dim pass: jit/ir/lowering.cc, gathers_again)."""
    if all(len(dim_corners) == 1 for dim_corners in corners):  # same size everywhere: a copy
        return _gather(input, sizes, [dim_corners[0][0] for dim_corners in corners])
    result = input
    for dim in reversed(range(len(sizes))):
        if len(corners[dim]) > 1:
            result = _resample_dim(result, dim, sizes[dim], corners[dim])
    return result


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resamples [N, C, *spatial] input (1 to 3 spatial dims) to `size` or by `scale_factor`, with PyTorch's
    coordinate conventions: 'nearest' (floor(dst * in/out)), 'nearest-exact' (pixel centres), 'linear' (3-D),
    'bilinear' (4-D) and 'trilinear' (5-D) with align_corners True or False, and 'area' (adaptive average
    pooling)."""
    if not isinstance(input, Var):
        raise TypeError(f"interpolate: input must be a metajit Var, got {type(input).__name__}")
    if mode not in _MODES:
        raise ValueError(f"interpolate: unsupported mode {mode!r}; expected one of {', '.join(_MODES)}")
    if input.ndim not in (3, 4, 5):
        raise ValueError(f"interpolate: expected a 3-D, 4-D or 5-D input [N, C, *spatial], got shape "
                         f"{tuple(input.shape)}")
    spatial = input.ndim - 2
    if mode in _LINEAR_MODES:
        if _LINEAR_MODES[mode] != spatial:
            raise ValueError(f"interpolate: got {input.ndim}-D input, but {mode} mode needs "
                             f"{_LINEAR_MODES[mode] + 2}-D input")
        if input.dtype not in _FLOAT_DTYPES:
            raise TypeError(f"interpolate: {mode} mode needs a floating-point input, got {input.dtype}")
    elif align_corners is not None:
        raise ValueError("interpolate: align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    sizes, scales = _output_sizes(input, size, scale_factor, recompute_scale_factor, spatial)
    extents = list(input.shape[2:])

    if mode == "area":
        from .pool import _adaptive_avg_pool
        return _adaptive_avg_pool(input, sizes, spatial, "interpolate")
    if mode in ("nearest", "nearest-exact"):
        indices = [_nearest_indices(extents[d], sizes[d], scales[d], mode == "nearest-exact") for d in range(spatial)]
        return _gather(input, sizes, indices)
    corners = [_linear_corners(extents[d], sizes[d], scales[d], bool(align_corners), input.dtype)
               for d in range(spatial)]
    return _blend(input, sizes, corners)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated PyTorch alias of interpolate."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated PyTorch alias of interpolate(..., mode='nearest')."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated PyTorch alias of interpolate(..., mode='bilinear', align_corners=True)."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
