"""Joining and splitting with PyTorch's names beyond cat / stack / split: hstack, vstack (row_stack), dstack,
column_stack, atleast_1d/2d/3d, block_diag, cartesian_prod, combinations, broadcast_tensors, broadcast_shapes,
tensor_split and split_with_sizes. All are reshapes, pads, index selections and cats of existing ops, so their
gradients come from those; only shapes and index lists (never values) are computed on the host."""
import itertools

import numpy as np

from .. import _core
from .._core import Var
from .layout import meshgrid
from .tensor import _as_var, _normalize_dim, cat, index_select, pad, split, stack

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack", "dstack", "column_stack",
           "block_diag", "cartesian_prod", "combinations", "broadcast_tensors", "broadcast_shapes", "tensor_split",
           "split_with_sizes"]


def _tensors(tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0]), True
    return list(tensors), len(tensors) != 1


def _at_least(tensors, rank, shapes):
    values, several = _tensors(tensors)
    results = []
    for value in values:
        value = _as_var(value)
        if value.ndim < rank:
            value = value.reshape(shapes(list(value.shape)))
        results.append(value)
    return tuple(results) if several else results[0]


def atleast_1d(*tensors):
    return _at_least(tensors, 1, lambda shape: [1] if not shape else shape)


def atleast_2d(*tensors):
    return _at_least(tensors, 2, lambda shape: [1, 1] if not shape else [1] + shape)


def atleast_3d(*tensors):
    # PyTorch (and numpy): a 1-D [n] becomes [1, n, 1], a 2-D [m, n] becomes [m, n, 1].
    return _at_least(tensors, 3, lambda shape: [1, 1, 1] if not shape else [1] + shape + [1] if len(shape) == 1
                     else shape + [1])


def hstack(tensors):
    tensors = [atleast_1d(value) for value in tensors]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([atleast_2d(value) for value in tensors], 0)


row_stack = vstack


def dstack(tensors):
    return cat([atleast_3d(value) for value in tensors], 2)


def column_stack(tensors):
    columns = []
    for value in tensors:
        value = _as_var(value)
        columns.append(value.reshape([value.numel() if value.ndim else 1, 1]) if value.ndim <= 1 else value)
    return cat(columns, 1)


def block_diag(*tensors):
    """The matrices (0-d and 1-d inputs count as 1 x 1 and 1 x n) along the diagonal of one matrix, zeros
    elsewhere."""
    matrices = []
    for value in tensors:
        value = _as_var(value)
        if value.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input has "
                               f"{value.ndim} dimensions")
        matrices.append(value.reshape([1, 1]) if value.ndim == 0 else value.reshape([1, -1]) if value.ndim == 1
                        else value)
    if not matrices:
        return _core.constant([1, 0], "float32", 0)
    width = sum(matrix.shape[1] for matrix in matrices)
    rows, left = [], 0
    for matrix in matrices:
        rows.append(pad(matrix, [left, width - left - matrix.shape[1]]))
        left += matrix.shape[1]
    return cat(rows, 0)


def cartesian_prod(*tensors):
    """Every combination of one element from each 1-D input, as rows (a single input comes back as it is)."""
    tensors = [_as_var(value) for value in tensors]
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([grid.reshape([-1]) for grid in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The r-length combinations of a 1-D input's elements, as rows, in itertools' order."""
    input = _as_var(input)
    if input.ndim != 1:
        raise ValueError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    picks = np.array(list(choose(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    if picks.shape[0] == 0:
        return _core.constant([0, r], input.dtype, 0)
    columns = [index_select(input, 0, picks[:, column]) for column in range(r)]
    return stack(columns, 1)


def broadcast_shapes(*shapes):
    from .._torch_tensor import Size
    shapes = [[shape] if isinstance(shape, int) else list(shape) for shape in shapes]
    try:
        return Size(np.broadcast_shapes(*[tuple(shape) for shape in shapes]))
    except ValueError:
        raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape: {shapes}") from None


def broadcast_tensors(*tensors):
    values, _ = _tensors(tensors)
    values = [_as_var(value) for value in values]
    shape = list(broadcast_shapes(*[value.shape for value in values]))
    return tuple(value if list(value.shape) == shape else _core.broadcast_to(value, shape) for value in values)


def tensor_split(input, indices_or_sections, dim=0):
    """Pieces along `dim`: a number of sections (the first n % sections pieces one longer), or the pieces
    between the given indices."""
    input = _as_var(input)
    dim = _normalize_dim(dim, input.ndim, "tensor_split")
    extent = input.shape[dim]
    if isinstance(indices_or_sections, Var):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        base, extra = divmod(extent, sections)
        bounds = np.cumsum([0] + [base + (1 if piece < extra else 0) for piece in range(sections)]).tolist()
    else:
        bounds = [0] + [min(max(int(index) if index >= 0 else extent + int(index), 0), extent)
                        for index in indices_or_sections] + [extent]
    pieces = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        stop = max(start, stop)
        pieces.append(input[tuple([slice(None)] * dim + [slice(start, stop)])])
    return tuple(pieces)


def split_with_sizes(input, split_sizes, dim=0):
    input = _as_var(input)
    if sum(split_sizes) != input.shape[_normalize_dim(dim, input.ndim, "split_with_sizes")]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {input.shape[dim]} (input "
                           f"tensor's size at dimension {dim}), but got split_sizes={list(split_sizes)}")
    return tuple(split(input, list(split_sizes), dim))



VAR_METHODS_IF_ABSENT = {"tensor_split": tensor_split,  # attached by _var_method_table.py
                         "split_with_sizes": split_with_sizes}
