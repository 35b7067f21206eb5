"""Reductions as functions with PyTorch's names (mj.sum(x, 1) as x.sum(1)), and the ones only PyTorch's
namespace has: amax / amin (values only, several dims at once) and all / any (truth of every / some element).

mj.max / mj.min (and x.max / x.min) follow PyTorch: the 0-d extreme, (values, indices) for one dim, or the
elementwise maximum / minimum of two tensors.
"""
import math

from .. import _core, _dtype_name, where
from .tensor import _as_var, _normalize_dims

__all__ = ["sum", "mean", "prod", "amax", "amin", "max", "min", "all", "any", "count_nonzero", "norm"]


def _dims(name, input, dim):
    """None or () -> every dim, else the normalised list (IndexError / ValueError as PyTorch)."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return list(range(input.ndim))
    return _normalize_dims(dim, input.ndim, name)


def sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over `dim` (int, sequence, or None for every dim); integers and bools sum in int64 as in PyTorch."""
    input = _as_var(input)
    if dtype is not None:
        input = _core.cast(input, _dtype_name(dtype))
    return _core.reduce(input, "add", _dims("sum", input, dim), keepdim)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product over `dim` (int, sequence, or None for every dim)."""
    input = _as_var(input)
    if dtype is not None:
        input = _core.cast(input, _dtype_name(dtype))
    return _core.reduce(input, "mul", _dims("prod", input, dim), keepdim)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    """Arithmetic mean over `dim`; integer inputs give float32 (PyTorch asks for dtype= there)."""
    input = _as_var(input)
    if dtype is not None:
        input = _core.cast(input, _dtype_name(dtype))
    return input.mean(_dims("mean", input, dim), keepdim)


def amax(input, dim=(), keepdim=False):
    """Largest value over `dim` (int, sequence; () for every dim). NaN wins, as in PyTorch."""
    input = _as_var(input)
    return _core.reduce(input, "max", _dims("amax", input, dim), keepdim)


def amin(input, dim=(), keepdim=False):
    """Smallest value over `dim` (int, sequence; () for every dim). NaN wins, as in PyTorch."""
    input = _as_var(input)
    return _core.reduce(input, "min", _dims("amin", input, dim), keepdim)


def _truth(input):
    input = _as_var(input)
    return input if input.dtype == "bool" else input != 0


def all(input, dim=None, keepdim=False):
    """Whether every element over `dim` is nonzero (bool)."""
    truth = _truth(input)
    return _core.reduce(truth, "and", _dims("all", truth, dim), keepdim)


def any(input, dim=None, keepdim=False):
    """Whether some element over `dim` is nonzero (bool)."""
    truth = _truth(input)
    return _core.reduce(truth, "or", _dims("any", truth, dim), keepdim)


def count_nonzero(input, dim=None):
    """How many elements over `dim` (int, sequence, or None for every dim) are nonzero (int64)."""
    truth = _truth(input)
    return _core.reduce(_core.cast(truth, "int64"), "add", _dims("count_nonzero", truth, dim), False)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector norm over `dim` (every dim when None): p = 2 or "fro" (the default), any other number p > 0,
    inf (largest magnitude), -inf (smallest) or 0 (count of nonzeros). The gradient of the 2-norm at a zero
    vector is 0, as in PyTorch."""
    input = _as_var(input)
    if dtype is not None:
        input = _core.cast(input, _dtype_name(dtype))
    if not input.dtype.startswith("float"):
        raise TypeError(f"norm: expected a floating-point input, got {input.dtype} (pass dtype=)")
    if p == "nuc":
        raise NotImplementedError("norm: the nuclear norm needs singular values, which metajit does not compute")
    if p == "fro":
        p = 2
    if isinstance(p, str) or isinstance(p, bool):
        raise ValueError(f"norm: unknown p {p!r} (a number, inf, -inf or 'fro')")
    dims = _dims("norm", input, dim)
    magnitude = abs(input)
    if p == math.inf:
        return _core.reduce(magnitude, "max", dims, keepdim)
    if p == -math.inf:
        return _core.reduce(magnitude, "min", dims, keepdim)
    if p == 0:
        return _core.cast(_core.reduce(_core.cast(input != 0, input.dtype), "add", dims, keepdim), input.dtype)
    if p < 0:
        raise ValueError(f"norm: p must be positive, inf, -inf or 0, got {p}")
    powered = magnitude * magnitude if p == 2 else magnitude ** p
    total = _core.reduce(powered, "add", dims, keepdim)
    # Where the total is 0 the root's derivative is infinite: take the root of 1 there and give 0, so the
    # gradient is 0 instead of nan. `!= 0` rather than `> 0`: a NaN total must stay NaN, as in PyTorch.
    nonzero = total != 0
    safe = where(nonzero, total, 1.0)
    root = safe.sqrt() if p == 2 else safe ** (1.0 / p)
    return where(nonzero, root, 0.0)


VAR_METHODS = {"norm": norm, "count_nonzero": count_nonzero, "amax": amax, "amin": amin,  # attached by
               "all": all, "any": any}  # _var_method_table.py


def max(input, dim=None, keepdim=False):  # noqa: A001 (PyTorch's name)
    """torch.max: max(x) the largest element, max(x, dim) the named tuple (values, indices), max(x, other)
    the elementwise maximum."""
    return _as_var(input).max(dim, keepdim)


def min(input, dim=None, keepdim=False):  # noqa: A001 (PyTorch's name)
    """torch.min: min(x) the smallest element, min(x, dim) the named tuple (values, indices), min(x, other)
    the elementwise minimum."""
    return _as_var(input).min(dim, keepdim)
