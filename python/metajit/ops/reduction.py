"""Reductions as functions with PyTorch's names (mj.sum(x, 1) as x.sum(1)), and the ones only PyTorch's
namespace has: amax / amin (values only, several dims at once) and all / any (truth of every / some element).

mj.max and mj.min are not defined: PyTorch's return (values, indices) for a dim and an elementwise maximum for two
tensors, while x.max(dim) here returns values only; mj.amax / mj.maximum say which one is meant.
"""
from .. import _core, _dtype_name
from .._core import Var
from .tensor import _as_var, _normalize_dims

__all__ = ["sum", "mean", "prod", "amax", "amin", "all", "any"]


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


Var.amax = amax
Var.amin = amin
Var.all = all
Var.any = any
