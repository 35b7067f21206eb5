"""Writing along an index with PyTorch's names: index_add, index_copy, index_fill, masked_scatter,
scatter_reduce and take_along_dim (out-of-place functions and Tensor methods; the in-place twins are installed
by _inplace.py). Each is index_put, gather or a reindex-reduce of the meta-ops, so gradients come from their
rules; nothing reads values on the host."""
import numpy as np

from .. import _core, full, where
from .._core import Var
from .indexing import index_put
from .tensor import _as_var, _index_var, _normalize_dim, _scatter_inputs, gather

__all__ = ["index_add", "index_copy", "index_fill", "masked_scatter", "scatter_reduce", "take_along_dim"]


def _key(input, dim, index, name):
    dim = _normalize_dim(dim, input.ndim, name)
    index = _index_var(index, name)
    if index.ndim > 1:
        raise IndexError(f"{name}: index should have dimension 1 or 0 (got {index.ndim})")
    return tuple([slice(None)] * dim + [index.reshape([-1])])


def index_add(input, dim, index, source, *, alpha=1):
    """input with alpha * source[..., k, ...] added at input[..., index[k], ...] along `dim` (repeats add up)."""
    input = _as_var(input)
    source = _as_var(source)
    if alpha != 1:
        source = source * alpha
    return index_put(input, _key(input, dim, index, "index_add"), source, accumulate=True)


def index_copy(input, dim, index, source):
    """input with input[..., index[k], ...] = source[..., k, ...] along `dim`."""
    input = _as_var(input)
    return index_put(input, _key(input, dim, index, "index_copy"), _as_var(source), accumulate=False)


def index_fill(input, dim, index, value):
    """input with `value` (a number or a 0-d Var) at the positions `index` along `dim`."""
    input = _as_var(input)
    if isinstance(value, Var):
        value = value if value.dtype == input.dtype else _core.cast(value, input.dtype)
    else:
        value = full([], value, input.dtype)
    return index_put(input, _key(input, dim, index, "index_fill"), value, accumulate=False)


def masked_scatter(input, mask, source):
    """input with its masked positions (the bool mask broadcast to input) filled, in row-major order, by the
    leading elements of source."""
    input, mask, source = _as_var(input), _as_var(mask), _as_var(source)
    if mask.dtype != "bool":
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {mask.dtype}")
    shape = list(np.broadcast_shapes(tuple(input.shape), tuple(mask.shape)))
    if list(input.shape) != shape:
        input = _core.broadcast_to(input, shape)
    if list(mask.shape) != shape:
        mask = _core.broadcast_to(mask, shape)
    flat_mask = mask.reshape([-1])
    # The k-th masked position takes source element k: k is the running count of masked positions before it.
    order = (_core.cast(flat_mask, "int64").cumsum(0) - 1).clamp(0, max(source.numel() - 1, 0))
    taken = gather(source.reshape([-1]), 0, order).reshape(shape)
    if taken.dtype != input.dtype:
        taken = _core.cast(taken, input.dtype)
    return where(mask, taken, input)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """input with src reduced into input[index[i][j]][j] (dim 0) by 'sum', 'prod', 'mean', 'amax' or 'amin';
    include_self=False leaves input's own value out of the positions that receive anything."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    input, index, src, targets = _scatter_inputs("scatter_reduce", input, dim, index, src)
    shape = list(input.shape)
    counts = _core.reindex_reduce(_core.cast(_core.constant(list(index.shape), "bool", True), "int64"), "add", shape,
                                  targets, [], [index])
    touched = counts > 0
    operation = {"sum": "add", "mean": "add", "prod": "mul", "amax": "max", "amin": "min"}[reduce]
    gathered = _core.reindex_reduce(src, operation, shape, targets, [], [index])
    if reduce in ("sum", "mean"):
        combined = gathered + input if include_self else gathered
        if reduce == "mean":
            divisor = counts + 1 if include_self else counts.maximum(_core.constant([], "int64", 1))
            divisor = _core.cast(divisor, input.dtype)
            combined = combined / divisor if input.dtype.startswith("float") else combined // divisor
    elif reduce == "prod":
        combined = gathered * input if include_self else gathered
    elif reduce == "amax":
        combined = gathered.maximum(input) if include_self else gathered
    else:
        combined = gathered.minimum(input) if include_self else gathered
    return where(touched, combined, input)


def take_along_dim(input, indices, dim=None):
    """Values of input at `indices` along `dim` (both broadcast in the other dims); with dim=None, of the
    flattened input at the flattened indices."""
    input, indices = _as_var(input), _index_var(indices, "take_along_dim")
    if dim is None:
        return gather(input.reshape([-1]), 0, indices.reshape([-1]))
    dim = _normalize_dim(dim, input.ndim, "take_along_dim")
    input_shape, index_shape = list(input.shape), list(indices.shape)
    input_shape[dim] = index_shape[dim] = 1
    common = list(np.broadcast_shapes(tuple(input_shape), tuple(index_shape)))
    input_target, index_target = list(common), list(common)
    input_target[dim], index_target[dim] = input.shape[dim], indices.shape[dim]
    if list(input.shape) != input_target:
        input = _core.broadcast_to(input, input_target)
    if list(indices.shape) != index_target:
        indices = _core.broadcast_to(indices, index_target)
    return gather(input, dim, indices)


VAR_METHODS_IF_ABSENT = {_name: globals()[_name] for _name in __all__}  # attached by _var_method_table.py
