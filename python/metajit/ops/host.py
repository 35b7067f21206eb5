"""Operators whose result's shape or value depends on the data: nonzero, masked_select, unique and allclose.
They compute their inputs (a sync) and finish on the host with numpy, as boolean-mask indexing does; the
results are new Vars without gradient history (masked_select's values keep it: they are a gather)."""
import numpy as np

from .. import array
from .._core import Var
from .tensor import _as_var

__all__ = ["nonzero", "argwhere", "masked_select", "unique", "allclose"]


def nonzero(input, *, as_tuple=False):
    """The int64 coordinates of the nonzero elements: [count, ndim] (PyTorch's default), or with as_tuple one
    1-D Var per dim."""
    values = _as_var(input).numpy()
    coordinates = np.nonzero(values)
    if as_tuple:
        return tuple(array(np.ascontiguousarray(axis, dtype=np.int64)) for axis in coordinates)
    return array(np.stack(coordinates, axis=1).astype(np.int64) if values.ndim else
                 np.zeros((int(bool(values)), 0), np.int64))


argwhere = nonzero


def masked_select(input, mask):
    """The elements of input where mask (broadcast to input's shape) is true, as a 1-D Var."""
    input = _as_var(input)
    mask = _as_var(mask)
    if mask.dtype != "bool":
        raise TypeError(f"masked_select: mask must be bool, got {mask.dtype}")
    if tuple(mask.shape) != tuple(input.shape):
        mask = mask.broadcast_to(list(np.broadcast_shapes(tuple(mask.shape), tuple(input.shape))))
        input = input.broadcast_to(list(mask.shape))
    return input[mask]


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (sorted), and on request the inverse indices and counts, as torch.unique; with `dim`,
    the distinct slices along it."""
    values = _as_var(input).numpy()
    result = np.unique(values, return_inverse=return_inverse, return_counts=return_counts, axis=dim)
    if not (return_inverse or return_counts):
        return array(np.ascontiguousarray(result))
    outputs = [array(np.ascontiguousarray(result[0]))]
    if return_inverse:
        inverse = result[1].astype(np.int64)
        outputs.append(array(inverse.reshape(values.shape if dim is None else inverse.shape)))
    if return_counts:
        outputs.append(array(result[-1].astype(np.int64)))
    return tuple(outputs)


def allclose(input, other, rtol=1e-5, atol=1e-8, equal_nan=False):
    """Whether |input - other| <= atol + rtol * |other| everywhere (a Python bool, as in PyTorch)."""
    first = _as_var(input).numpy()
    second = other.numpy() if isinstance(other, Var) else np.asarray(other)
    return bool(np.allclose(first, second, rtol=rtol, atol=atol, equal_nan=equal_nan))


def _method_nonzero(self, *, as_tuple=False):
    return nonzero(self, as_tuple=as_tuple)


def _method_unique(self, sorted=True, return_inverse=False, return_counts=False, dim=None):
    return unique(self, sorted, return_inverse, return_counts, dim)


VAR_METHODS = {"nonzero": _method_nonzero, "argwhere": _method_nonzero, "masked_select": masked_select,  # attached
               "unique": _method_unique, "allclose": allclose}  # by _var_method_table.py
