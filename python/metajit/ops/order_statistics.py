"""Order statistics with PyTorch's names: kthvalue, median (the lower median), quantile, aminmax and msort. Each
sorts with metajit's sort and reads the wanted positions; values read through the sorted order carry the gradient
to the elements they came from."""
import collections

import numpy as np

from .. import _core
from .._core import Var
from .sorting import sort
from .tensor import _as_var, _normalize_dim

__all__ = ["kthvalue", "median", "quantile", "aminmax", "msort"]

KthvalueResult = collections.namedtuple("KthvalueResult", ["values", "indices"])
MedianResult = collections.namedtuple("MedianResult", ["values", "indices"])
AminmaxResult = collections.namedtuple("AminmaxResult", ["min", "max"])


def _pick(input, position, dim, keepdim):
    """(values, indices) of the `position`-th smallest along dim."""
    ordered = sort(input, dim)
    key = tuple([slice(None)] * dim + [slice(position, position + 1)])
    values, indices = ordered.values[key], ordered.indices[key]
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return values, indices


def kthvalue(input, k, dim=-1, keepdim=False):
    """(values, indices) of the k-th smallest element (k from 1) along `dim`."""
    input = _as_var(input)
    dim = _normalize_dim(dim, input.ndim, "kthvalue")
    extent = input.shape[dim] if input.ndim else 1
    if not 1 <= k <= extent:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {dim}")
    if input.ndim == 0:
        return KthvalueResult(input, _core.constant([], "int64", 0))
    return KthvalueResult(*_pick(input, k - 1, dim, keepdim))


def median(input, dim=None, keepdim=False):
    """The lower median ((n - 1) // 2-th smallest): of all elements as a 0-d Var without dim, else (values,
    indices) along dim."""
    input = _as_var(input)
    if dim is None:
        flat = input.reshape([-1])
        return _pick(flat, (flat.shape[0] - 1) // 2, 0, False)[0]
    dim = _normalize_dim(dim, input.ndim, "median")
    if input.ndim == 0:
        return MedianResult(input, _core.constant([], "int64", 0))
    return MedianResult(*_pick(input, (input.shape[dim] - 1) // 2, dim, keepdim))


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles (q a number or a 1-D list / Var of numbers in [0, 1]) of all elements or along `dim`,
    between the two neighbouring sorted values by `interpolation` ('linear', 'lower', 'higher', 'nearest',
    'midpoint'). A 1-D q adds a leading dim."""
    input = _as_var(input)
    if interpolation not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"quantile() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                         f"Got {interpolation}")
    scalar = not isinstance(q, (list, tuple, Var, np.ndarray))
    levels = np.atleast_1d(np.asarray(q.numpy() if isinstance(q, Var) else q, dtype=np.float64))
    if levels.ndim > 1 or ((levels < 0) | (levels > 1)).any():
        raise RuntimeError("quantile() q values must be in the range [0, 1] and q must be at most 1-D")
    if dim is None:
        values, dim = input.reshape([-1]), 0
        keep_shape = [1] * input.ndim
    else:
        dim = _normalize_dim(dim, input.ndim, "quantile")
        values = input
        keep_shape = None
    ordered = sort(values, dim).values
    extent = values.shape[dim]
    results = []
    for level in levels:
        rank = level * (extent - 1)
        lower, upper = int(np.floor(rank)), int(np.ceil(rank))
        if interpolation == "lower":
            upper = lower
        elif interpolation == "higher":
            lower = upper
        elif interpolation == "nearest":
            lower = upper = int(np.round(rank))  # round half to even, as PyTorch
        low = ordered[tuple([slice(None)] * dim + [lower])]
        high = ordered[tuple([slice(None)] * dim + [upper])]
        weight = 0.5 if interpolation == "midpoint" else rank - lower
        result = low if lower == upper else low + (high - low) * weight
        if keepdim:
            result = result.reshape(keep_shape) if keep_shape is not None else result.unsqueeze(dim)
        results.append(result)
    if scalar:
        return results[0]
    from .tensor import stack
    return stack(results, 0)


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) of all elements, or along dim."""
    input = _as_var(input)
    if dim is None:
        if keepdim:
            shape = [1] * input.ndim
            return AminmaxResult(input.min().reshape(shape), input.max().reshape(shape))
        return AminmaxResult(input.min(), input.max())
    return AminmaxResult(input.amin(dim, keepdim), input.amax(dim, keepdim))


def msort(input):
    return sort(_as_var(input), 0).values



VAR_METHODS_IF_ABSENT = {_name: globals()[_name] for _name in __all__}  # attached by _var_method_table.py
