"""Diagonals of matrices with PyTorch's names: diagonal (a view of any two dims), diag_embed, diagflat, trace, and
the index lists tril_indices / triu_indices. diagonal and diag_embed are single reindexes, so their gradients are
the meta-op's; the index lists depend only on the sizes given, never on tensor values."""
import numpy as np

from .. import _core, array
from .layout import diag
from .tensor import _as_var, _normalize_dim

__all__ = ["diagonal", "diag_embed", "diagflat", "trace", "tril_indices", "triu_indices"]


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The `offset`-th diagonal of the (dim1, dim2) planes, as a new last dim (offset > 0 above the main one)."""
    input = _as_var(input)
    dim1, dim2 = _normalize_dim(dim1, input.ndim, "diagonal"), _normalize_dim(dim2, input.ndim, "diagonal")
    if dim1 == dim2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    rows, columns = input.shape[dim1], input.shape[dim2]
    length = max(0, min(rows, columns - offset) if offset >= 0 else min(rows + offset, columns))
    kept = [axis for axis in range(input.ndim) if axis not in (dim1, dim2)]
    position = f"i{len(kept)}"
    indexes = []
    for axis in range(input.ndim):
        if axis == dim1:
            indexes.append(position if offset >= 0 else f"({position} + {-offset})")
        elif axis == dim2:
            indexes.append(f"({position} + {offset})" if offset >= 0 else position)
        else:
            indexes.append(f"i{kept.index(axis)}")
    return _core.reindex(input, [input.shape[axis] for axis in kept] + [length], indexes, 0.0, [], [])


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices in the (dim1, dim2) planes of the result with input's last dim on their `offset`-th diagonal."""
    input = _as_var(input)
    rank = input.ndim + 1
    dim1, dim2 = _normalize_dim(dim1, rank, "diag_embed"), _normalize_dim(dim2, rank, "diag_embed")
    if dim1 == dim2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    size = input.shape[-1] + abs(offset)
    kept = [axis for axis in range(rank) if axis not in (dim1, dim2)]
    shape = [0] * rank
    for position, axis in enumerate(kept):
        shape[axis] = input.shape[position]
    shape[dim1] = shape[dim2] = size
    row, column = f"i{dim1}", f"i{dim2}"
    along = row if offset >= 0 else column
    indexes = [f"i{axis}" for axis in kept] + [along]
    off_diagonal = f"{column} - {row} != {offset}"
    # The diagonal's end past the input (the rows beyond the last element) reads nothing.
    beyond = f"{along} >= {input.shape[-1]}"
    return _core.reindex(input, shape, indexes, 0.0, [off_diagonal, beyond], [])


def diagflat(input, offset=0):
    return diag(_as_var(input).reshape([-1]), offset)


def trace(input=None, **options):
    """The sum of a matrix's main diagonal (torch.trace). Given a function instead (``@mj.trace``,
    ``mj.trace(step)``, ``@mj.trace(max_variants=4)``), MegEngine's trace: mj.jit.trace."""
    if input is None or callable(input):
        from ..jit import trace as trace_function
        return trace_function(input, **options)
    if options:
        raise TypeError(f"trace: unexpected options {sorted(options)} for a matrix")
    input = _as_var(input)
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return diagonal(input).sum()


def _indices(name, row, column, offset, dtype, lower):
    if row < 0 or column < 0:
        raise RuntimeError(f"{name}: row and col must be non-negative, got {row} and {column}")
    mask = np.tri(row, column, offset, dtype=bool) if lower else ~np.tri(row, column, offset - 1, dtype=bool)
    return array(np.stack(np.nonzero(mask)).astype(np.int64), dtype=dtype)


def tril_indices(row, col, offset=0, *, dtype="int64", device=None, layout=None):
    """The [2, n] row and column indices of the lower triangle (at and below the `offset`-th diagonal)."""
    return _indices("tril_indices", row, col, offset, dtype, True)


def triu_indices(row, col, offset=0, *, dtype="int64", device=None, layout=None):
    """The [2, n] row and column indices of the upper triangle (at and above the `offset`-th diagonal)."""
    return _indices("triu_indices", row, col, offset, dtype, False)


VAR_METHODS_IF_ABSENT = {"diagonal": diagonal, "diag_embed": diag_embed, "diagflat": diagflat,  # attached by
                         "trace": trace}  # _var_method_table.py
