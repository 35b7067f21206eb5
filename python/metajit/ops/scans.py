"""Running maxima, minima and log-sum-exps along a dim (cummax, cummin, logcumsumexp), as PyTorch's.

Each is a reduction over the triangle k <= i of a reindex (element i sees terms 0..i), so a row of n costs n^2
work; cummax / cummin then read their values with gather at the indices they found, so the gradient goes to the
element that is the running extreme, as in PyTorch."""
import collections

from .. import _core
from .reduction import amax
from .tensor import _as_var, _normalize_dim, gather

__all__ = ["cummax", "cummin", "logcumsumexp"]

CumulativeResult = collections.namedtuple("CumulativeResult", ["values", "indices"])


def _triangle(input, fill):
    """[..., n] -> [..., n, n]: row i holds input[0..i], then `fill` (the dim scanned must be the last)."""
    rank = input.ndim
    indexes = [f"i{axis}" for axis in range(rank - 1)] + [f"i{rank}"]
    extent = input.shape[-1]
    return _core.reindex(input, list(input.shape) + [extent], indexes, fill, [f"i{rank} > i{rank - 1}"], [])


def _extreme_fill(dtype, largest):
    if dtype.startswith("float"):
        return float("-inf") if largest else float("inf")
    import numpy as np
    info = np.iinfo("int64" if dtype == "bool" else dtype)
    return float(info.min if largest else info.max)


def _cumulative_extreme(name, input, dim, largest):
    input = _as_var(input)
    if input.ndim == 0:
        _normalize_dim(dim, 0, name)
        return CumulativeResult(input, _core.constant([], "int64", 0))
    dim = _normalize_dim(dim, input.ndim, name)
    last = input.ndim - 1
    moved = input.transpose(dim, last) if dim != last else input
    source = moved.detach()
    triangle = _triangle(source, _extreme_fill(source.dtype, largest))
    running = _core.reduce(triangle, "max" if largest else "min", [moved.ndim], False)
    # The last position at or before i holding the running extreme (PyTorch keeps the latest of equal values).
    extent = moved.shape[-1]
    positions = _core.arange(0.0, float(extent), 1.0, "int64")
    rank = moved.ndim
    hits = (triangle == running.unsqueeze(-1)) | ((triangle != triangle) & (running != running).unsqueeze(-1))
    candidates = _core.where(hits, _core.broadcast_to(positions, list(triangle.shape)),
                             _core.constant([], "int64", -1))
    indices = _core.reduce(candidates, "max", [rank], False)
    values = gather(moved, last, indices)
    if dim != last:
        values, indices = values.transpose(dim, last), indices.transpose(dim, last)
    return CumulativeResult(values, indices)


def cummax(input, dim):
    """(values, indices): the running maximum along `dim` and where it was (the latest of equal maxima)."""
    return _cumulative_extreme("cummax", input, dim, True)


def cummin(input, dim):
    """(values, indices): the running minimum along `dim` and where it was (the latest of equal minima)."""
    return _cumulative_extreme("cummin", input, dim, False)


def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along `dim`, computed stably (each prefix is a logsumexp)."""
    input = _as_var(input)
    if not input.dtype.startswith("float"):
        input = _core.cast(input, "float32")
    if input.ndim == 0:
        _normalize_dim(dim, 0, "logcumsumexp")
        return input
    dim = _normalize_dim(dim, input.ndim, "logcumsumexp")
    last = input.ndim - 1
    moved = input.transpose(dim, last) if dim != last else input
    triangle = _triangle(moved, float("-inf"))
    # The prefix maximum shifts each row; it is detached because logsumexp's value does not depend on it.
    shift = amax(triangle, -1, True).detach()
    shift = _core.where(shift == float("-inf"), _core.constant([], shift.dtype, 0.0), shift)
    result = ((triangle - shift).exp().sum(-1, True)).log() + shift
    result = result.squeeze(-1)
    return result.transpose(dim, last) if dim != last else result


VAR_METHODS_IF_ABSENT = {_name: globals()[_name] for _name in __all__}  # attached by _var_method_table.py
