"""Tensor manipulation with PyTorch's names: joining and splitting (cat, stack, split, chunk), padding, gathering
and scattering along a dim, clamping, arg-reductions, cumulative sums and shape helpers.

Everything is a view, a reindex, a reindex-reduce or an elementwise op, so gradients come from the meta-ops'
rules: cat and pad are reindexes (their gradients are slices of the incoming gradient), gather and index_select
are reindexes reading an integer extra input (their gradients scatter-add), scatter and scatter_add are
reindex-reduces (their gradients gather). Integer index tensors given as numpy arrays, lists or already computed
Vars are range-checked on the host (IndexError, as PyTorch); an index Var that is still lazy is not synced for
the check, and an out-of-range entry then reads 0 (or is skipped when scattering).
"""
import math

import numpy as np

from .. import _core, _dtype_name, array, full, where
from .._core import Var

__all__ = ["cat", "concat", "concatenate", "stack", "split", "chunk", "pad", "gather", "scatter", "scatter_add",
           "index_select", "clamp", "clip", "argmax", "argmin", "cumsum", "cumprod", "flatten", "squeeze", "unsqueeze",
           "flip", "roll", "one_hot", "tril", "triu"]

_INTEGER_DTYPES = ("int8", "uint8", "int32", "int64")


# ------------------------------------------------------------------------------------------------------- helpers
def _as_var(value, dtype=None):
    """A Var for a Var, numpy array, list or number (numbers get PyTorch's default dtypes)."""
    if isinstance(value, Var):
        return value if dtype is None or value.dtype == dtype else _core.cast(value, dtype)
    return array(value, dtype=dtype)


def _normalize_dim(dim, ndim, name="dim"):
    """`dim` in [0, ndim) (a 0-d Var accepts 0 and -1, as in PyTorch); IndexError otherwise."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{name}: dim must be an integer, got {type(dim).__name__}")
    extent = max(ndim, 1)
    if not -extent <= dim < extent:
        raise IndexError(f"{name}: dimension out of range (expected to be in range of [{-extent}, {extent - 1}], "
                         f"but got {dim})")
    return int(dim) + extent if dim < 0 else int(dim)


def _normalize_dims(dims, ndim, name="dim"):
    """A sorted list of distinct dims from an int or a sequence; a repeated dim is an error."""
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        dims = [dims]
    result = [_normalize_dim(dim, ndim, name) for dim in dims]
    if len(set(result)) != len(result):
        raise ValueError(f"{name}: dim {list(dims)} appears multiple times in the list of dims")
    return sorted(result)


def _index_var(index, name):
    """An integer index Var from a Var, numpy array or list; TypeError for any other dtype."""
    if not isinstance(index, Var):
        array = np.asarray(index)
        if array.size == 0 and array.dtype == np.float64:
            array = array.astype(np.int64)
        if array.dtype.kind not in "iu":
            raise TypeError(f"{name}: index must be an integer tensor, got {array.dtype}")
        index = _core.array(np.ascontiguousarray(array.astype(np.int64)))
    elif index.dtype not in _INTEGER_DTYPES:
        raise TypeError(f"{name}: index must be an integer tensor, got {index.dtype}")
    return index


def _check_index_range(index, extent, dim, name):
    """Host-side range check of an index Var whose value is already there (no sync is forced)."""
    if not index.is_computed or index.numel() == 0:
        return
    values = index.numpy()
    low, high = int(values.min()), int(values.max())
    for bad in (low, high):
        if not 0 <= bad < extent:
            raise IndexError(f"{name}: index {bad} is out of bounds for dimension {dim} with size {extent}")


def _loop_indices(count):
    return [f"i{position}" for position in range(count)]


def _slice_along(input, dim, start, stop):
    key = (slice(None),) * dim + (slice(start, stop),)
    return input[key]


# -------------------------------------------------------------------------------------------- joining, splitting
def cat(tensors, dim=0):
    """Concatenates along `dim` (one fused kernel of shifted reindexes; each input's gradient is the matching
    part of the incoming gradient). Dtypes promote as in PyTorch; 1-D empty inputs are skipped (legacy PyTorch
    behaviour)."""
    if isinstance(tensors, Var) or not isinstance(tensors, (list, tuple)):
        raise TypeError("cat: expected a sequence of Vars (a list or tuple), got " + type(tensors).__name__)
    if not tensors:
        raise ValueError("cat: expected a non-empty list of Vars")
    tensors = [_as_var(tensor) for tensor in tensors]
    non_empty = [tensor for tensor in tensors if not (tensor.ndim == 1 and tensor.shape[0] == 0)]
    if not non_empty:
        return tensors[0]
    reference = non_empty[0]
    if reference.ndim == 0:
        raise ValueError("cat: zero-dimensional Vars cannot be concatenated (unsqueeze them or use stack)")
    dim = _normalize_dim(dim, reference.ndim, "cat")
    for position, tensor in enumerate(non_empty):
        if tensor.ndim != reference.ndim:
            raise ValueError(f"cat: Vars must have the same number of dimensions: got {reference.ndim} and "
                             f"{tensor.ndim} (input {position})")
        for axis in range(reference.ndim):
            if axis != dim and tensor.shape[axis] != reference.shape[axis]:
                raise ValueError(f"cat: sizes of Vars must match except in dimension {dim}: expected size "
                                 f"{reference.shape[axis]} but got size {tensor.shape[axis]} for input {position} "
                                 f"in dimension {axis}")
    return _join(non_empty, dim)


_MATERIALIZE_ABOVE = 4  # joins of more pieces are computed into a buffer when gradients flow


def _place_and_add(pieces, dim):
    """Each piece placed by a reindex shifted to its offset that reads an identity element elsewhere (-0.0 for
    floats, so x + (-0.0) == x keeps every value, signed zeros included; 0 for integers; false for bools), and
    the placed pieces added (or-ed): one fused kernel. The gradient of an add reaches each piece unchanged, so
    each piece's gradient is one scatter of the incoming gradient over the joined extent."""
    dtype = pieces[0].dtype
    if any(piece.dtype != dtype for piece in pieces):
        true = _core.constant([], "bool", 1)
        for piece in pieces[1:]:  # PyTorch's promotion, as the elementwise ops apply it
            dtype = _core.where(true, _core.constant([], dtype, 0), _core.constant([], piece.dtype, 0)).dtype
    shape = list(pieces[0].shape)
    shape[dim] = sum(piece.shape[dim] for piece in pieces)
    identity = -0.0 if dtype.startswith("float") else 0.0
    result, offset = None, 0
    identity_indexes = _loop_indices(len(shape))
    for piece in pieces:
        indexes = identity_indexes
        if offset:
            indexes = list(identity_indexes)
            indexes[dim] = f"i{dim} - {offset}"
        offset += piece.shape[dim]
        if piece.dtype != dtype:
            piece = _core.cast(piece, dtype)
        placed = _core.reindex(piece, shape, indexes, identity, [], [])
        result = placed if result is None else (result | placed if dtype == "bool" else result + placed)
    return result


# A kernel renders its loop once per piece up to this many (jit/codegen/cpp/cpp_renderer.cc, piece_loops).
_MOST_PIECES = 8
_MOST_PIECES_IN_A_KERNEL = _MOST_PIECES ** 2  # more than this: each group's join is a kernel of its own


def _stored(value):
    """`value` computed into a buffer of its own (an identity reindex_reduce is always materialised)."""
    return _core.reindex_reduce(value, "add", list(value.shape), _loop_indices(value.ndim), [], [])


def _join(pieces, dim):
    """Concatenation of checked pieces. With gradients flowing and more than a few pieces, the result is
    computed into a buffer: each piece's backward scatter would otherwise recompute the incoming gradient, and
    with it the whole join, costing O(K^2 * size).
    More pieces than a kernel renders a loop for are joined in groups first: one kernel joining 64 pieces read
    all 64 at every element (stacking 64 [32, 1024] pieces took 7.2 ms, concatenating them along dim 1 65 ms).
    Past 64 pieces each group is stored: one kernel holding every piece grows with their number, and the time to
    compile it faster still."""
    if len(pieces) > _MOST_PIECES:
        groups = [pieces[start:start + _MOST_PIECES] for start in range(0, len(pieces), _MOST_PIECES)]
        store_groups = len(pieces) > _MOST_PIECES_IN_A_KERNEL
        joined = []
        for group in groups:
            if len(group) == 1:
                joined.append(group[0])
                continue
            group_join = _join(group, dim)
            joined.append(_stored(group_join) if store_groups and not group_join.requires_grad else group_join)
        return _join(joined, dim)
    result = _place_and_add(pieces, dim)
    if len(pieces) > _MATERIALIZE_ABOVE and result.requires_grad:
        result = _stored(result)
    return result


def concat(tensors, dim=0):
    return cat(tensors, dim)


def concatenate(tensors, axis=0):
    return cat(tensors, axis)


def stack(tensors, dim=0):
    """Joins equally shaped Vars along a new dim."""
    if isinstance(tensors, Var) or not isinstance(tensors, (list, tuple)):
        raise TypeError("stack: expected a sequence of Vars (a list or tuple), got " + type(tensors).__name__)
    if not tensors:
        raise ValueError("stack: expected a non-empty list of Vars")
    tensors = [_as_var(tensor) for tensor in tensors]
    for position, tensor in enumerate(tensors):
        if tensor.shape != tensors[0].shape:
            raise ValueError(f"stack: expects each Var to be equal size, but got {list(tensors[0].shape)} at entry 0 "
                             f"and {list(tensor.shape)} at entry {position}")
    dim = _normalize_dim(dim, tensors[0].ndim + 1, "stack")
    return cat([unsqueeze(tensor, dim) for tensor in tensors], dim)


def split(tensor, split_size_or_sections, dim=0):
    """Views of consecutive pieces along `dim`: of split_size each (the last may be smaller), or of the listed
    sizes (which must add up to the extent)."""
    tensor = _as_var(tensor)
    dim = _normalize_dim(dim, tensor.ndim, "split")
    extent = tensor.shape[dim] if tensor.ndim else 1
    if isinstance(split_size_or_sections, (int, np.integer)) and not isinstance(split_size_or_sections, bool):
        size = int(split_size_or_sections)
        if size < 0 or (size == 0 and extent != 0):
            raise ValueError(f"split: split_size must be a positive integer, got {size}")
        sizes = [size] * (extent // size) + ([extent % size] if extent % size else []) if size else [0]
    else:
        sizes = [int(size) for size in split_size_or_sections]
        if any(size < 0 for size in sizes) or sum(sizes) != extent:
            raise ValueError(f"split: split_sizes {sizes} must be non-negative and sum exactly to {extent} "
                             f"(the size of dimension {dim})")
    pieces, start = [], 0
    for size in sizes:
        pieces.append(_slice_along(tensor, dim, start, start + size))
        start += size
    return tuple(pieces)


def chunk(input, chunks, dim=0):
    """Splits into `chunks` pieces of ceil(extent / chunks) (fewer pieces when that already covers the extent)."""
    input = _as_var(input)
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks <= 0:
        raise ValueError(f"chunk: chunks must be a positive integer, got {chunks!r}")
    dim = _normalize_dim(dim, input.ndim, "chunk")
    extent = input.shape[dim]
    size = max(-(-extent // int(chunks)), 1)
    return split(input, size, dim)


# ------------------------------------------------------------------------------------------------------- padding
def pad(input, pad, mode="constant", value=None):
    """Pads (or, with negative amounts in 'constant' mode, crops) the last len(pad) // 2 dims. `pad` lists
    (left, right) amounts starting from the last dim, as in PyTorch. Modes: 'constant' (with `value`, default 0),
    'reflect' (mirror without repeating the edge), 'replicate' (repeat the edge) and 'circular' (wrap around).
    Every mode is one reindex, so its gradient accumulates into the positions that were read."""
    input = _as_var(input)
    pad = [int(amount) for amount in pad]
    if len(pad) % 2:
        raise ValueError(f"pad: padding length must be divisible by 2, got {len(pad)}")
    if len(pad) // 2 > input.ndim:
        raise ValueError(f"pad: padding length {len(pad)} is too large for a Var of {input.ndim} dimensions")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if mode != "constant" and value is not None and value != 0:
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in value argument")
    shape, indexes = list(input.shape), _loop_indices(input.ndim)
    for pair in range(len(pad) // 2):
        dim = input.ndim - 1 - pair
        left, right = pad[2 * pair], pad[2 * pair + 1]
        extent = input.shape[dim]
        shape[dim] = extent + left + right
        if shape[dim] < 0:
            raise ValueError(f"pad: the padded size of dimension {dim} would be {shape[dim]} (size {extent}, "
                             f"padding {left}, {right})")
        shifted = f"(i{dim} - {left})" if left else f"i{dim}"
        if mode == "constant":
            indexes[dim] = shifted
            continue
        if left < 0 or right < 0:
            raise ValueError(f"pad: negative padding is only supported in 'constant' mode, got {left}, {right}")
        if mode == "reflect":
            if left >= extent or right >= extent:
                raise ValueError(f"pad: padding size should be less than the corresponding input dimension, but got "
                                 f"padding ({left}, {right}) at dimension {dim} of size {extent}")
            # Distance from the far edge folded twice: ... 2 1 | 0 1 2 3 | 2 1 ...
            indexes[dim] = f"{extent - 1} - abs({extent - 1} - abs{shifted})" if left else \
                f"{extent - 1} - abs({extent - 1} - {shifted})"
        elif mode == "replicate":
            if extent == 0:
                raise ValueError(f"pad: 'replicate' padding needs a non-empty dimension {dim}")
            indexes[dim] = f"min(max({shifted}, 0), {extent - 1})"
        else:
            if left > extent or right > extent:
                raise ValueError(f"pad: padding value causes wrapping around more than once (padding ({left}, "
                                 f"{right}) at dimension {dim} of size {extent})")
            indexes[dim] = f"{shifted} % {extent}"
    fill = 0.0 if value is None else float(value)
    return _core.reindex(input, shape, indexes, fill, [], [])


# -------------------------------------------------------------------------------------- gather, scatter, select
def _check_index_like(name, input, dim, index, against=None):
    if index.ndim != max(input.ndim, 1) and not (input.ndim == 0 and index.ndim == 0):
        raise ValueError(f"{name}: index must have the same number of dimensions as input ({input.ndim}), "
                         f"got {index.ndim}")
    for axis in range(index.ndim):
        if axis != dim and input.ndim and index.shape[axis] > input.shape[axis]:
            raise ValueError(f"{name}: size of index {list(index.shape)} must not exceed the input's "
                             f"{list(input.shape)} in dimension {axis} != dim")
        if against is not None and against.ndim and index.shape[axis] > against.shape[axis]:
            raise ValueError(f"{name}: size of index {list(index.shape)} must not exceed src's "
                             f"{list(against.shape)} in dimension {axis}")


def gather(input, dim, index, *, sparse_grad=False):
    """out[i][j][k] = input[index[i][j][k]][j][k] (for dim 0, and likewise for other dims)."""
    input = _as_var(input)
    dim = _normalize_dim(dim, input.ndim, "gather")
    index = _index_var(index, "gather")
    _check_index_like("gather", input, dim, index)
    if input.ndim == 0:
        return gather(input.reshape([1]), 0, index.reshape([1]) if index.ndim == 0 else index).reshape(index.shape)
    _check_index_range(index, input.shape[dim], dim, "gather")
    indexes = _loop_indices(index.ndim)
    indexes[dim] = "@e0(" + ", ".join(_loop_indices(index.ndim)) + ")"
    return _core.reindex(input, list(index.shape), indexes, 0.0, [], [index])


def _scatter_inputs(name, input, dim, index, src):
    input = _as_var(input)
    dim = _normalize_dim(dim, input.ndim, name)
    index = _index_var(index, name)
    if not isinstance(src, Var) and np.ndim(src) == 0:
        src = full(list(index.shape), src, input.dtype)
    src = _as_var(src)
    if src.ndim != index.ndim:
        raise ValueError(f"{name}: index ({index.ndim} dims) and src ({src.ndim} dims) must have the same number of "
                         "dimensions")
    _check_index_like(name, input, dim, index, src)
    if input.ndim:
        _check_index_range(index, input.shape[dim], dim, name)
    if src.shape != index.shape:  # only the leading index-shaped block of src is used
        src = src[tuple(slice(0, extent) for extent in index.shape)]
    if src.dtype != input.dtype:
        src = _core.cast(src, input.dtype)
    targets = _loop_indices(index.ndim)
    targets[dim] = "@e0(" + ", ".join(_loop_indices(index.ndim)) + ")"
    return input, index, src, targets


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of input with input[index[i][j]][j] = src[i][j] (dim 0). src may be a number (or pass value=).
    Where several entries target one position the last one in index order wins (deterministic, like PyTorch on
    CPU). reduce='add' or 'multiply' combines instead of replacing."""
    from .indexing import _put
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter: src (a Var or a number) or value= is required")
    input, index, src, targets = _scatter_inputs("scatter", input, dim, index, src)
    if input.ndim == 0:
        return scatter(input.reshape([1]), 0, index.reshape([1]), src.reshape([1]), reduce=reduce).reshape([])
    if reduce is None:
        return _put(input, targets, [index], src, accumulate=False)
    if reduce == "add":
        return _put(input, targets, [index], src, accumulate=True)
    if reduce == "multiply":
        return input * _core.reindex_reduce(src, "mul", list(input.shape), targets, [], [index])
    raise ValueError(f"scatter: reduce argument must be either 'add' or 'multiply', got {reduce!r}")


def scatter_add(input, dim, index, src):
    """A copy of input with src added at the indexed positions (repeated targets accumulate)."""
    input, index, src, targets = _scatter_inputs("scatter_add", input, dim, index, src)
    if input.ndim == 0:
        return scatter_add(input.reshape([1]), 0, index.reshape([1]), src.reshape([1])).reshape([])
    return input + _core.reindex_reduce(src, "add", list(input.shape), targets, [], [index])


def index_select(input, dim, index):
    """The entries of `input` at the positions `index` (1-D) along `dim`."""
    input = _as_var(input)
    dim = _normalize_dim(dim, input.ndim, "index_select")
    index = _index_var(index, "index_select")
    if index.ndim > 1:
        raise ValueError(f"index_select: index must be 0-D or 1-D, got {index.ndim} dimensions")
    if index.ndim == 0:
        index = index.reshape([1])
    if input.ndim == 0:
        return index_select(input.reshape([1]), 0, index).reshape([])
    if index.is_computed and index.numel():
        values = index.numpy()
        if values.min() < 0 or values.max() >= input.shape[dim]:
            raise IndexError(f"index_select: index out of range in self (an index of {list(values)[:8]} is "
                             f"outside [0, {input.shape[dim]}) for dimension {dim})")
    shape = list(input.shape)
    shape[dim] = index.shape[0]
    indexes = _loop_indices(input.ndim)
    indexes[dim] = f"@e0(i{dim})"
    return _core.reindex(input, shape, indexes, 0.0, [], [index])


# ---------------------------------------------------------------------------------------------------- clamping
def clamp(input, min=None, max=None):
    """Limits values to [min, max] (numbers or Vars). Where min > max the result is max, NaN stays NaN, and the
    gradient passes where min <= x <= max (bounds included), as in PyTorch. Dtypes promote with the bounds."""
    input = _as_var(input)
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    result = input
    if min is not None:
        result = where(result < min, min, result)
    if max is not None:
        result = where(result > max, max, result)
    return result


def clip(input, min=None, max=None):
    return clamp(input, min, max)


# ------------------------------------------------------------------------------------------------ arg-reductions
def _arg_reduce(name, op, input, dim, keepdim):
    input = _as_var(input).detach()
    if input.dtype == "bool":
        input = _core.cast(input, "uint8")
    if dim is None:
        flat = input.reshape([input.numel()])
        result = _arg_reduce(name, op, flat, 0, False)
        return result.reshape([1] * input.ndim) if keepdim else result
    if input.ndim == 0:
        _normalize_dim(dim, 0, name)
        return _core.constant([], "int64", 0)
    dim = _normalize_dim(dim, input.ndim, name)
    extent = input.shape[dim]
    if extent == 0:
        raise ValueError(f"{name}: expected reduction dim {dim} to have non-zero size")
    best = _core.reduce(input, op, [dim], True)
    # A NaN wins (PyTorch propagates it): the reduction is NaN there and only x != x marks its position.
    hits = (input == best) | (input != input)
    position_shape = [extent if axis == dim else 1 for axis in range(input.ndim)]
    positions = _core.arange(0.0, float(extent), 1.0, "int64").reshape(position_shape)
    first = _core.reduce(where(hits, positions, extent), "min", [dim], keepdim)
    return first


def argmax(input, dim=None, keepdim=False):
    """Index of the maximum along `dim` (of the flattened input if dim is None); ties give the first, NaN wins."""
    return _arg_reduce("argmax", "max", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    """Index of the minimum along `dim` (of the flattened input if dim is None); ties give the first, NaN wins."""
    return _arg_reduce("argmin", "min", input, dim, keepdim)


# ---------------------------------------------------------------------------------------------- cumulative sum
_TRIANGLE_LIMIT = 64  # up to this length a scan is one masked reduction over an n x n triangle


def _scan_block(extent):
    """Block length for a long scan: the largest divisor of extent from 16 to 64, so the row needs no padding
    (a padded block's terms are guarded loads, which keep its scan scalar), preferring one that leaves at most
    64 blocks (one level of blocks); else about sqrt(extent), padded."""
    divisors = [block for block in range(_TRIANGLE_LIMIT, 15, -1) if extent % block == 0]
    single_level = [block for block in divisors if extent // block <= _TRIANGLE_LIMIT]
    if single_level or divisors:
        return (single_level or divisors)[0]
    return math.isqrt(extent - 1) + 1


def _scan_along(input, op, from_end):
    """Inclusive prefix sums (op "add") or products ("mul") along dim -1 (from_end 1) or -2 (from_end 2). Short
    rows: the reduction over the triangle k <= i (a reindex plus a reduction). Long rows: blocks (see
    _scan_block), scanned inside each block by the triangle, then combined with the exclusive scan of the block
    totals; both parts are meta-ops, so the gradient comes from their rules. The C++ renderer runs a triangle as
    one pass (docs/design.md, "Running sums"): along the last dim row by row, along dim -2 with one accumulator
    per column."""
    identity = 0.0 if op == "add" else 1.0
    fill = None if op == "add" else 1  # pad's value: its default 0 for sums, an int 1 keeps integer dtypes
    rank = input.ndim
    axis = rank - from_end
    extent, head, tail = input.shape[axis], list(input.shape[:axis]), list(input.shape[axis + 1:])
    if extent <= _TRIANGLE_LIMIT:
        indexes = _loop_indices(rank)
        indexes[axis] = f"i{rank}"  # the triangle's last dim is the term r; element i keeps terms r <= i
        triangle = _core.reindex(input, list(input.shape) + [extent], indexes, identity, [f"i{rank} > i{axis}"], [])
        return _core.reduce(triangle, op, [rank], False)
    block = _scan_block(extent)
    blocks = -(-extent // block)
    widths = [0, 0] * len(tail) + [0, blocks * block - extent]  # pad's pairs run from the last dim
    grouped = pad(input, widths, value=fill).reshape(head + [blocks, block] + tail)
    inside = _scan_along(grouped, op, from_end)
    # A sum's block totals are summed from the input, not read off the scan's last column: then nothing but the
    # final combination reads the scan, and both fuse into one kernel (one pass per block, offset as it goes).
    # A product's keep the scan's last column, so they overflow or vanish exactly where a running product does.
    block_dim = len(head) + 1
    if op == "add":
        totals = grouped.sum(block_dim)
    else:
        totals = inside[tuple([slice(None)] * block_dim + [block - 1])]
    # The exclusive scan of the block totals, as the inclusive scan of the totals shifted right by one (not the
    # inclusive scan undone by the totals: inf - inf or 0 / 0 would turn a block into NaN).
    shifted = pad(totals, [0, 0] * len(tail) + [1, 0], value=fill)
    shifted = shifted[tuple([slice(None)] * len(head) + [slice(0, blocks)])]
    before = _scan_along(shifted, op, from_end).reshape(head + [blocks, 1] + tail)
    combined = inside + before if op == "add" else inside * before
    joined = combined.reshape(head + [blocks * block] + tail)
    return joined[tuple([slice(None)] * len(head) + [slice(0, extent)])]


_COLUMN_SCAN_WIDTH = 16  # scans along a dim with at least this many elements after it run in place (dim -2)


def _scan(name, op, input, dim, dtype):
    input = _as_var(input)
    if dtype is not None:
        input = _core.cast(input, _dtype_name(dtype))
    elif not input.dtype.startswith("float") and input.dtype != "int64":
        input = _core.cast(input, "int64")
    if input.ndim == 0:
        _normalize_dim(dim, 0, name)
        return input
    dim = _normalize_dim(dim, input.ndim, name)
    last = input.ndim - 1
    if dim == last:
        return _scan_along(input, op, 1)
    inner = math.prod(input.shape[dim + 1:])
    if inner >= _COLUMN_SCAN_WIDTH:
        # [outer, n, inner] without moving data; the scan walks n with a vector of columns at a time.
        outer = math.prod(input.shape[:dim])
        scanned = _scan_along(input.reshape([outer, input.shape[dim], inner]), op, 2)
        return scanned.reshape(list(input.shape))
    return _scan_along(input.transpose(dim, last), op, 1).transpose(dim, last)


def cumprod(input, dim, *, dtype=None):
    """Inclusive cumulative product along `dim`. Integer and bool inputs multiply in int64 (as PyTorch) unless
    dtype= is given. The gradient is right at zeros too (prod's gradient is the product of the others)."""
    return _scan("cumprod", "mul", input, dim, dtype)


def cumsum(input, dim, *, dtype=None):
    """Inclusive cumulative sum along `dim`. Integer and bool inputs sum in int64 (as PyTorch) unless dtype= is
    given."""
    return _scan("cumsum", "add", input, dim, dtype)


def _triangle(name, input, diagonal, zero_above):
    input = _as_var(input)
    if input.ndim < 2:
        raise ValueError(f"{name}: input must have at least 2 dimensions, got shape {list(input.shape)}")
    if isinstance(diagonal, bool) or not isinstance(diagonal, (int, np.integer)):
        raise TypeError(f"{name}: diagonal must be an integer, got {type(diagonal).__name__}")
    row, column = f"i{input.ndim - 2}", f"i{input.ndim - 1}"
    # Element (row, column) lies on diagonal column - row; the other side reads 0.
    outside = f"{column} - {row} > {int(diagonal)}" if zero_above else f"{column} - {row} < {int(diagonal)}"
    return _core.reindex(input, list(input.shape), _loop_indices(input.ndim), 0.0, [outside], [])


def tril(input, diagonal=0):
    """The lower triangle of the last two dims (elements with column - row <= diagonal); the rest are 0."""
    return _triangle("tril", input, diagonal, True)


def triu(input, diagonal=0):
    """The upper triangle of the last two dims (elements with column - row >= diagonal); the rest are 0."""
    return _triangle("triu", input, diagonal, False)


# ---------------------------------------------------------------------------------------------- shape helpers
def flatten(input, start_dim=0, end_dim=-1):
    """Merges dims start_dim..end_dim into one (a 0-d input becomes 1-D)."""
    input = _as_var(input)
    if input.ndim == 0:
        _normalize_dim(start_dim, 0, "flatten")
        _normalize_dim(end_dim, 0, "flatten")
        return input.reshape([1])
    start = _normalize_dim(start_dim, input.ndim, "flatten")
    end = _normalize_dim(end_dim, input.ndim, "flatten")
    if start > end:
        raise ValueError(f"flatten: start_dim ({start_dim}) cannot come after end_dim ({end_dim})")
    merged = 1
    for extent in input.shape[start:end + 1]:
        merged *= extent
    return input.reshape(list(input.shape[:start]) + [merged] + list(input.shape[end + 1:]))


def squeeze(input, dim=None):
    """Removes size-1 dims: all of them, or those among `dim` (an int or a tuple; other sizes are left alone)."""
    input = _as_var(input)
    if dim is None:
        dims = range(input.ndim)
    else:
        dims = _normalize_dims(dim, input.ndim, "squeeze")
    dropped = {axis for axis in dims if input.ndim and input.shape[axis] == 1}
    return input.reshape([extent for axis, extent in enumerate(input.shape) if axis not in dropped])


def unsqueeze(input, dim):
    """Inserts a size-1 dim at position `dim` (in [-ndim - 1, ndim])."""
    input = _as_var(input)
    dim = _normalize_dim(dim, input.ndim + 1, "unsqueeze")
    shape = list(input.shape)
    shape.insert(dim, 1)
    return input.reshape(shape)


def flip(input, dims):
    """Reverses the order of elements along each of `dims` (a view)."""
    input = _as_var(input)
    dims = _normalize_dims(dims, input.ndim, "flip")
    if input.ndim == 0:
        return input
    return input[tuple(slice(None, None, -1) if axis in dims else slice(None) for axis in range(input.ndim))]


def roll(input, shifts, dims=None):
    """Rotates elements along `dims` by `shifts` (ints or equal-length tuples); with dims=None the flattened
    input is rolled and the shape restored."""
    input = _as_var(input)
    if dims is None:
        if not isinstance(shifts, (int, np.integer)):
            shifts = list(shifts)
            if len(shifts) != 1:
                raise ValueError("roll: with dims=None, shifts must be a single integer")
            shifts = shifts[0]
        return roll(input.reshape([input.numel()]), int(shifts), 0).reshape(list(input.shape))
    shifts = [int(shifts)] if isinstance(shifts, (int, np.integer)) else [int(shift) for shift in shifts]
    dims = [dims] if isinstance(dims, (int, np.integer)) else list(dims)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts and dims must align, got shifts={shifts} and dims={dims}")
    indexes = _loop_indices(input.ndim)
    for shift, dim in zip(shifts, dims):
        dim = _normalize_dim(dim, input.ndim, "roll")
        extent = input.shape[dim] if input.ndim else 1
        if extent and shift % extent:
            indexes[dim] = f"({indexes[dim]} - {shift % extent}) % {extent}"
    if input.ndim == 0 or indexes == _loop_indices(input.ndim):
        return input
    return _core.reindex(input, list(input.shape), indexes, 0.0, [], [])


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding with a new last dim of num_classes. num_classes=-1 means max(tensor) + 1, which
    syncs `tensor` to read its maximum."""
    tensor = _index_var(tensor, "one_hot")
    if num_classes == -1 or tensor.is_computed:
        values = tensor.numpy()
        if values.size and values.min() < 0:
            raise ValueError("one_hot: class values must be non-negative")
        if num_classes == -1:
            if values.size == 0:
                raise ValueError("one_hot: can not infer the total number of classes from an empty tensor")
            num_classes = int(values.max()) + 1
        elif values.size and values.max() >= num_classes:
            raise ValueError(f"one_hot: class values must be smaller than num_classes ({num_classes}), "
                             f"got {int(values.max())}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be a non-negative integer or -1, got {num_classes!r}")
    classes = _core.arange(0.0, float(num_classes), 1.0, "int64")
    return _core.cast(unsqueeze(tensor, -1) == classes, "int64")


# ------------------------------------------------------------------------------------------------- Var methods
def _method_split(self, split_size, dim=0):
    return split(self, split_size, dim)


def _method_chunk(self, chunks, dim=0):
    return chunk(self, chunks, dim)


def _method_flatten(self, start_dim=0, end_dim=-1):
    return flatten(self, start_dim, end_dim)


def _method_squeeze(self, dim=None):
    return squeeze(self, dim)


def _method_flip(self, *dims):
    return flip(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], (int, np.integer)) else dims)


def _method_cumsum(self, dim, *, dtype=None):
    return cumsum(self, dim, dtype=dtype)


def _method_cumprod(self, dim, *, dtype=None):
    return cumprod(self, dim, dtype=dtype)


def _method_argmax(self, dim=None, keepdim=False):
    return argmax(self, dim, keepdim)


def _method_argmin(self, dim=None, keepdim=False):
    return argmin(self, dim, keepdim)


def _method_clamp(self, min=None, max=None):
    return clamp(self, min, max)


def _method_roll(self, shifts, dims=None):
    return roll(self, shifts, dims)


VAR_METHODS = {
    "split": _method_split, "chunk": _method_chunk, "flatten": _method_flatten, "squeeze": _method_squeeze,
    "unsqueeze": unsqueeze, "flip": _method_flip, "cumsum": _method_cumsum, "cumprod": _method_cumprod,
    "argmax": _method_argmax,
    "argmin": _method_argmin, "clamp": _method_clamp, "clip": _method_clamp, "gather": gather,
    "index_select": index_select, "scatter": scatter, "scatter_add": scatter_add, "roll": _method_roll,
    "tril": tril, "triu": triu,
}  # attached by _var_method_table.py
