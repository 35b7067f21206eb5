"""Placing values among sorted boundaries and counting them into bins: bucketize, searchsorted and histc, as
PyTorch's. Each is a broadcast comparison followed by a sum (no host computation on the values); the results
are integer counts or bin totals and have no gradient."""
from .. import _core, _dtype_name
from .tensor import _as_var

__all__ = ["bucketize", "searchsorted", "histc"]


def _count_below(sequence, values, right, out_int32):
    """How many entries of `sequence` (sorted along its last dim) are < value (<= value with right=True);
    sequence [..., M] against values [..., K] (or [K] against any shape when sequence is 1-D)."""
    if sequence.ndim == 1:
        expanded_values = values.unsqueeze(-1)
        expanded_sequence = sequence
    else:
        expanded_values = values.unsqueeze(-1)
        expanded_sequence = sequence.unsqueeze(-2)
    below = (expanded_sequence <= expanded_values) if right else (expanded_sequence < expanded_values)
    counts = _core.cast(below, "int64").sum(-1)
    return _core.cast(counts, "int32") if out_int32 else counts


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each element: i with boundaries[i-1] < x <= boundaries[i] (with right=True,
    boundaries[i-1] <= x < boundaries[i]); boundaries is 1-D and sorted."""
    values, boundaries = _as_var(input), _as_var(boundaries)
    if boundaries.ndim != 1:
        raise RuntimeError(f"bucketize: boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return _count_below(boundaries, values, right, out_int32)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Where each value would be inserted into `sorted_sequence` (sorted along its last dim) to keep it sorted:
    before equal entries ('left'), or after them (right=True or side='right'). An N-D sequence searches row by
    row, with the values' leading dims matching its own."""
    sequence = _as_var(sorted_sequence)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"searchsorted: side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("searchsorted: side and right can't be set to opposites, got side of left while "
                               "right was True")
        right = side == "right"
    if sorter is not None:
        sequence = sequence.gather(-1, _as_var(sorter))
    values = _as_var(input)
    if sequence.ndim > 1 and tuple(sequence.shape[:-1]) != tuple(values.shape[:-1]):
        raise RuntimeError(f"searchsorted: boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                           f"boundaries tensor and input value tensor must match, but we got boundaries tensor "
                           f"{list(sequence.shape)} and input value tensor {list(values.shape)}")
    return _count_below(sequence, values, right, out_int32)


def histc(input, bins=100, min=0, max=0):
    """Histogram of the elements in `bins` equal-width bins over [min, max] (the data's own range when both are 0);
    elements outside are ignored, the maximum goes to the last bin. Same dtype as input."""
    input = _as_var(input)
    if not input.dtype.startswith("float"):
        raise RuntimeError(f"histc: \"histogram_cpu\" not implemented for '{input.dtype}'")
    if bins <= 0:
        raise RuntimeError(f"histc: bins must be > 0, but got {bins}")
    if min > max:
        raise RuntimeError(f"histc: max must be larger than min, got min {min} and max {max}")
    values = input.detach().reshape([-1])
    if min == max and values.shape[0]:
        low, high = values.min(), values.max()
    else:
        low, high = _core.constant([], input.dtype, float(min)), _core.constant([], input.dtype, float(max))
    same = low == high  # PyTorch widens an empty range by one on each side
    low, high = _core.where(same, low - 1.0, low), _core.where(same, high + 1.0, high)
    inside = (values >= low) & (values <= high)
    position = ((values - low) * float(bins) / (high - low)).floor()
    position = _core.cast(position.clamp(0.0, float(bins - 1)), "int64")
    bin_numbers = _core.arange(0.0, float(bins), 1.0, "int64")
    hits = (position.unsqueeze(-1) == bin_numbers) & inside.unsqueeze(-1)
    return _core.cast(hits, _dtype_name(input.dtype)).sum(0)


def _method_bucketize(self, boundaries, *, out_int32=False, right=False):
    return bucketize(self, boundaries, out_int32=out_int32, right=right)


VAR_METHODS_IF_ABSENT = {"bucketize": _method_bucketize, "histc": histc}  # attached by _var_method_table.py
