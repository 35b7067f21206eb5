"""Advanced indexing (x[index_array], x[mask]), index assignment (x[key] = value) and their out-of-place forms
index_put and masked_fill.

Reading: a key with integer arrays becomes one reindex whose index expressions read the arrays as extra inputs
(`@e0(...)`), so its gradient is a scatter-add; PyTorch's placement rules apply (integers select first; the
broadcast index dims replace the indexed dims when the arrays are adjacent, else they lead). A boolean mask is
turned into integer arrays with numpy's nonzero: the result's shape depends on the data, so a lazy mask Var is
synced at that point.

Writing: Vars are immutable graph nodes, so x[key] = value builds the new value lazily (slices: a reindex of the
value into x's shape and a where; integer arrays: a scatter) and then makes `x` hold it with x.assign(), which
computes it now. That is allowed for Vars without gradient history, and for leaves that require grad inside
mj.no_grad() (initialisation); anything else raises and points to mj.where / index_put / masked_fill. A Var that
was sliced from x earlier keeps the old values (Vars never share storage).
"""
import numpy as np

from .. import _core, array, full, where
from .._core import Var

__all__ = ["index_put", "masked_fill"]

_INTEGER_DTYPES = ("int8", "uint8", "int32", "int64")


class _Advanced:
    """One advanced index entry: an integer array indexing input dim `dim` (None for a bool scalar, which adds a
    dim of size 1 or 0 and indexes nothing). `array` is a host numpy array (already normalized and range
    checked) or a Var (negative entries wrapped in the index expression)."""

    def __init__(self, dim, array):
        self.dim = dim
        self.array = array

    @property
    def shape(self):
        return tuple(self.array.shape)


def _is_integer(item):
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def _classify(item):
    """'basic', 'bool' (a Python/numpy bool), 'mask' (a bool array or Var) or 'array' (an integer array or Var);
    converts host sequences to numpy arrays."""
    if item is None or item is Ellipsis or isinstance(item, slice):
        return "basic", item
    if isinstance(item, (bool, np.bool_)):
        return "bool", bool(item)
    if _is_integer(item):
        return "basic", int(item)
    if isinstance(item, Var):
        if item.dtype == "bool":
            return "mask", item
        if item.dtype in _INTEGER_DTYPES:
            return "array", item
        raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors, got {item.dtype}")
    if isinstance(item, (list, tuple, range, np.ndarray)):
        array = np.asarray(item)
        if array.size == 0 and array.dtype.kind == "f":
            array = array.astype(np.int64)
        if array.dtype == np.bool_:
            return "mask", array
        if array.dtype.kind in "iu":
            return "array", array.astype(np.int64)
        raise IndexError(f"arrays used as indices must be of integer or boolean type, got {array.dtype}")
    raise TypeError(f"index {item!r} of type {type(item).__name__} is not supported: use integers, slices, None, "
                    "..., integer arrays or boolean masks (lists, numpy arrays or Vars)")


def _mask_indices(mask, shape, first_dim):
    """The integer arrays selecting the true positions of a mask indexing dims first_dim.. (syncs a Var mask)."""
    mask_shape = tuple(mask.shape)
    indexed = tuple(shape[first_dim:first_dim + len(mask_shape)])
    for position, extent in enumerate(mask_shape):
        if position >= len(indexed) or indexed[position] != extent:
            have = indexed[position] if position < len(indexed) else None
            raise IndexError(f"The shape of the mask {list(mask_shape)} at index {position} does not match the shape "
                             f"of the indexed tensor {list(shape)} at index {first_dim + position}"
                             + ("" if have is not None else " (too many dims)"))
    values = mask.numpy() if isinstance(mask, Var) else mask
    return [positions.astype(np.int64) for positions in np.nonzero(values)]


def _host_array(array, extent, dim):
    """A normalized (negative entries wrapped) and range-checked host index array."""
    if array.size:
        low, high = int(array.min()), int(array.max())
        for bad in (low, high):
            if not -extent <= bad < extent:
                raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {extent}")
    return np.where(array < 0, array + extent, array)


class _Key:
    """A parsed index key over a Var of `shape`: the result shape and, per input dim, the index expression that
    maps a result position to the input position it reads (over result indices i0.. and extras @e0..)."""

    def __init__(self, shape, key):
        if not isinstance(key, tuple):
            key = (key,)
        classified = [_classify(item) for item in key]
        if sum(1 for kind, item in classified if item is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        consumed = 0
        for kind, item in classified:
            if kind == "basic" and item is not None and item is not Ellipsis:
                consumed += 1
            elif kind == "array":
                consumed += 1
            elif kind == "mask":
                consumed += item.ndim
        if consumed > len(shape):
            raise IndexError(f"too many indices for a Var of rank {len(shape)}: {consumed} were given")
        expanded = []
        for kind, item in classified:
            if item is Ellipsis:
                expanded.extend([("basic", slice(None))] * (len(shape) - consumed))
            else:
                expanded.append((kind, item))
        if not any(item is Ellipsis for kind, item in classified):
            expanded.extend([("basic", slice(None))] * (len(shape) - consumed))
        self.input_shape = tuple(shape)
        self.advanced = any(kind != "basic" for kind, item in expanded)
        # entries: ("slice", dim, start, step, length) | ("new",) | ("int", dim, value) | ("advanced", [_Advanced])
        self.entries = []
        dim = 0
        for kind, item in expanded:
            if kind == "basic" and item is None:
                self.entries.append(("new",))
            elif kind == "basic" and isinstance(item, int):
                extent = shape[dim]
                if not -extent <= item < extent:
                    raise IndexError(f"index {item} is out of bounds for dimension {dim} with size {extent}")
                self.entries.append(("int", dim, item + extent if item < 0 else item))
                dim += 1
            elif kind == "basic":
                start, stop, step = item.indices(shape[dim])
                length = len(range(start, stop, step))
                self.entries.append(("slice", dim, start if length else 0, step, length))
                dim += 1
            elif kind == "bool":
                self.entries.append(("advanced", [_Advanced(None, np.zeros(1 if item else 0, np.int64))]))
            elif kind == "mask":
                arrays = _mask_indices(item, shape, dim) if item.ndim else None
                if arrays is None:  # a 0-d mask acts as a bool scalar
                    value = bool(item.numpy() if isinstance(item, Var) else item)
                    self.entries.append(("advanced", [_Advanced(None, np.zeros(1 if value else 0, np.int64))]))
                    continue
                self.entries.append(("advanced", [_Advanced(dim + position, array)
                                                  for position, array in enumerate(arrays)]))
                dim += len(arrays)
            else:
                if isinstance(item, np.ndarray):
                    item = _host_array(item, shape[dim], dim)
                self.entries.append(("advanced", [_Advanced(dim, item)]))
                dim += 1
        if self.advanced:
            self._place_advanced()

    def _place_advanced(self):
        """Broadcast shape of the index arrays and where its dims go (PyTorch: integers do not count)."""
        arrays = [entry for kind, *rest in self.entries if kind == "advanced" for entry in rest[0]]
        try:
            self.broadcast_shape = tuple(np.broadcast_shapes(*[array.shape for array in arrays]))
        except ValueError:
            shapes = ", ".join(str(list(array.shape)) for array in arrays)
            raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together with shapes {shapes}") \
                from None
        producing = [kind for kind, *rest in self.entries if kind != "int"]
        positions = [position for position, kind in enumerate(producing) if kind == "advanced"]
        self.adjacent = positions == list(range(positions[0], positions[-1] + 1))

    def result_shape(self):
        """Result shape, and for every producing entry its first result dim."""
        shape, first_dims = [], []
        block_inserted = False
        if self.advanced and not self.adjacent:
            shape.extend(self.broadcast_shape)
            block_inserted = True
        for entry in self.entries:
            kind = entry[0]
            if kind == "int":
                first_dims.append(None)
            elif kind == "advanced":
                if not block_inserted:
                    first_dims.append(len(shape))
                    shape.extend(self.broadcast_shape)
                    block_inserted = True
                else:
                    first_dims.append(0 if not self.adjacent else None)
            else:
                first_dims.append(len(shape))
                shape.append(1 if kind == "new" else entry[4])
        return shape, first_dims

    def expressions(self):
        """(result shape, one index expression per input dim, extras): result position -> input position."""
        shape, first_dims = self.result_shape()
        block_start = first_dims[[entry[0] for entry in self.entries].index("advanced")] if self.advanced else 0
        indexes = [None] * len(self.input_shape)
        extras = []
        block_rank = len(self.broadcast_shape) if self.advanced else 0
        for entry, first in zip(self.entries, first_dims):
            kind = entry[0]
            if kind == "int":
                indexes[entry[1]] = str(entry[2])
            elif kind == "slice":
                _, dim, start, step, _ = entry
                term = f"i{first}" if step == 1 else f"{step} * i{first}"
                indexes[dim] = term if start == 0 else f"{start} + {term}"
            elif kind == "advanced":
                for advanced in entry[1]:
                    if advanced.dim is None:
                        continue
                    # Read the array aligned to the trailing dims of the broadcast block (size-1 dims read 0).
                    offset = block_rank - len(advanced.shape)
                    arguments = ["0" if extent == 1 else f"i{block_start + offset + position}"
                                 for position, extent in enumerate(advanced.shape)]
                    array = advanced.array
                    if isinstance(array, np.ndarray):
                        array = _core.array(np.array(array, order="C"))  # (ascontiguousarray makes 0-d 1-d)
                    read = f"@e{len(extras)}({', '.join(arguments)})"
                    extras.append(array)
                    extent = self.input_shape[advanced.dim]
                    if isinstance(advanced.array, Var):  # negative entries count from the end
                        read = f"({read} < 0 ? {read} + {extent} : {read})"
                    indexes[advanced.dim] = read
        return shape, indexes, extras

    def view_mapping(self):
        """For keys without index arrays: the (output dim, step, offset) per input dim of a View."""
        shape, first_dims = self.result_shape()
        mapping = []
        for entry, first in zip(self.entries, first_dims):
            if entry[0] == "int":
                mapping.append((-1, 0, entry[2]))
            elif entry[0] == "slice":
                mapping.append((first, entry[3], entry[2]))
        return shape, mapping


def getitem(self, key):
    """x[key] with integers, slices, None, ..., integer arrays and boolean masks (PyTorch semantics)."""
    basic = _core.basic_view(self, key)  # in-range integers and slices, the common key, parsed in C++
    if basic is not None:
        return basic
    parsed = _Key(self.shape, key)
    if not parsed.advanced:
        shape, mapping = parsed.view_mapping()
        return _core.view(self, shape, mapping)
    shape, indexes, extras = parsed.expressions()
    return _core.reindex(self, shape, indexes, 0.0, [], extras)


def _put(input, targets, extras, values, accumulate):
    """input with `values` written at the positions `targets` (expressions over values' indices i0.. giving the
    input position per input dim). accumulate adds (repeated targets add up); otherwise, where several values
    target one position, the last in row-major order wins: each position first records the largest
    (row-major) number of a value aimed at it, then reads that value."""
    shape = list(input.shape)
    if accumulate:
        return input + _core.reindex_reduce(values, "add", shape, targets, [], extras)
    count = values.numel()
    order = _core.arange(0.0, float(count), 1.0, "int64").reshape(list(values.shape))
    winner = _core.reindex_reduce(order, "max", shape, targets, [], extras)  # int64 minimum where nothing lands
    flat = values.reshape([count])
    read = _core.reindex(flat, shape, ["@e0(" + ", ".join(f"i{dim}" for dim in range(len(shape))) + ")"], 0.0,
                         [], [winner])
    return where(winner >= 0, read, input)


def _value_for(input, value, shape):
    """`value` as a Var of input's dtype broadcast to the indexing result `shape`."""
    if isinstance(value, Var):
        value = value if value.dtype == input.dtype else _core.cast(value, input.dtype)
    else:
        value = array(np.asarray(value), dtype=input.dtype)
    try:
        np.broadcast_shapes(tuple(value.shape), tuple(shape))
        if len(value.shape) > len(shape) and any(extent != 1 for extent in value.shape[:len(value.shape) - len(shape)]):
            raise ValueError
    except ValueError:
        raise ValueError(f"shape mismatch: value of shape {list(value.shape)} cannot be broadcast to the indexing "
                         f"result of shape {list(shape)}") from None
    if len(value.shape) > len(shape):
        value = value.reshape(list(value.shape[len(value.shape) - len(shape):]))
    return _core.broadcast_to(value, list(shape)) if tuple(value.shape) != tuple(shape) else value


def _put_basic(input, parsed, value, accumulate):
    """Writes through a key of integers and slices: each input position computes which value element (if any)
    lands on it, so the update is one fused reindex + where with no scatter."""
    shape, first_dims = parsed.result_shape()
    value = _value_for(input, value, shape)
    value_indexes = ["0"] * len(shape)  # new (None) dims of the result have size 1
    conditions = []
    for entry, first in zip(parsed.entries, first_dims):
        if entry[0] == "int":
            conditions.append(f"i{entry[1]} != {entry[2]}")
        elif entry[0] == "slice":
            _, dim, start, step, _ = entry
            offset = f"(i{dim} - {start})" if start else f"i{dim}"
            value_indexes[first] = offset if step == 1 else f"{offset} / {step}"
            if step != 1:
                conditions.append(f"{offset} % {step} != 0")
    target = list(input.shape)
    placed = _core.reindex(value, target, value_indexes, 0.0, conditions, [])
    if accumulate:
        return input + placed
    written = _core.reindex(full(list(shape), True, "bool"), target, value_indexes, 0.0, conditions, [])
    return where(written, placed, input)


def _mask_fast_path(input, key, value):
    """x[mask] = value with a value that does not depend on the mask's count: a where, no sync."""
    if isinstance(key, tuple):
        if len(key) != 1:
            return None
        key = key[0]
    boolean_var = isinstance(key, Var) and key.dtype == "bool"
    if not boolean_var and not (isinstance(key, np.ndarray) and key.dtype == np.bool_):
        return None
    mask_rank = key.ndim
    if mask_rank == 0 or tuple(key.shape) != tuple(input.shape[:mask_rank]):
        return None
    value_shape = tuple(value.shape) if isinstance(value, (Var, np.ndarray)) else np.shape(value)
    rest = tuple(input.shape[mask_rank:])
    if len(value_shape) > len(rest) and any(extent != 1 for extent in value_shape[:len(value_shape) - len(rest)]):
        return None
    try:
        np.broadcast_shapes(value_shape[max(len(value_shape) - len(rest), 0):], rest)
    except ValueError:
        return None
    mask = key if isinstance(key, Var) else _core.array(key)
    mask = mask.reshape(list(key.shape) + [1] * len(rest))
    value = _value_for(input, value, (1,) * mask_rank + rest)
    return where(mask, value, input)


def index_put(input, indices, values, accumulate=False):
    """Out-of-place x[indices] = values (PyTorch's torch.index_put). `indices` is a tuple of index entries; unlike
    PyTorch, slices, integers, None and ... are accepted besides integer arrays and masks. accumulate=True adds
    (repeated positions add up); otherwise the last value aimed at a position wins. Differentiable in both input
    and values."""
    input = input if isinstance(input, Var) else _core.array(np.asarray(input))
    key = tuple(indices) if isinstance(indices, list) else indices
    if not accumulate:
        fast = _mask_fast_path(input, key, values)
        if fast is not None:
            return fast
    parsed = _Key(input.shape, key)
    if not parsed.advanced:
        return _put_basic(input, parsed, values, accumulate)
    shape, targets, extras = parsed.expressions()
    return _put(input, targets, extras, _value_for(input, values, shape), accumulate)


def masked_fill(input, mask, value):
    """A copy of input with `value` (a number or a 0-d Var) where the bool `mask` (broadcast to input) is true;
    the dtype stays input's."""
    input = input if isinstance(input, Var) else _core.array(np.asarray(input))
    mask = mask if isinstance(mask, Var) else _core.array(np.asarray(mask))
    if mask.dtype != "bool":
        raise TypeError(f"masked_fill only supports boolean masks, but got mask with dtype {mask.dtype}")
    try:
        if np.broadcast_shapes(tuple(mask.shape), tuple(input.shape)) != tuple(input.shape):
            raise ValueError
    except ValueError:
        raise ValueError(f"masked_fill: the mask of shape {list(mask.shape)} cannot be broadcast to the input's shape "
                         f"{list(input.shape)}") from None
    if isinstance(value, Var):
        if value.ndim != 0:
            raise ValueError(f"masked_fill only supports a 0-dimensional value tensor, but got tensor with "
                             f"{value.ndim} dimension(s)")
        value = value if value.dtype == input.dtype else _core.cast(value, input.dtype)
    else:
        value = full([], value, input.dtype)
    return where(mask, value, input)


def _selects_everything(key, rank):
    """Whether an indexing key is only full slices, no more than `rank`, and at most one Ellipsis (x[:], x[...],
    x[:, :])."""
    parts = key if isinstance(key, tuple) else (key,)
    ellipses = sum(part is Ellipsis for part in parts)
    full = all(part is Ellipsis or (isinstance(part, slice) and part == slice(None)) for part in parts)
    return full and ellipses <= 1 and len(parts) - ellipses <= rank


def setitem(self, key, value):
    """x[key] = value, as PyTorch: a key of integers, slices, None and ... names a view of x, and value (broadcast
    to it, cast to x's dtype) is copied into that view, so x and every view sharing its values see it; other
    keys write index_put(x, key, value) into x. The new value is computed now, so a loop of writes never builds
    one ever-deeper expression."""
    first_node_id = _core.next_node_id()
    # x[:] = v and x[...] = v write x itself, as PyTorch's indexing returns x for such keys (no view): a second
    # backward through x then works as after any in-place op, where one through a view's write raises.
    target = self if self.ndim > 0 and _selects_everything(key, self.ndim) else _core.basic_view(self, key)
    if target is None:
        parsed = _Key(self.shape, key)
        if not parsed.advanced:
            shape, mapping = parsed.view_mapping()
            target = _core.view(self, shape, mapping)
    if target is None:
        self._write(index_put(self, key if isinstance(key, tuple) else (key,), value), "setitem", first_node_id)
    else:
        if not isinstance(value, Var):
            value = full([], value, self.dtype) if isinstance(value, (bool, int, float)) else array(value)
        checked = value.ndim > 0  # PyTorch fills from a 0-d value, unchecked
        if tuple(value.shape) != tuple(target.shape):
            try:
                value = _core.broadcast_to(value, list(target.shape))
            except ValueError:
                raise ValueError(f"shape mismatch: value tensor of shape {list(value.shape)} cannot be broadcast to "
                                 f"indexing result of shape {list(target.shape)}") from None
        if checked:  # against the value as broadcast, as PyTorch copies it
            from .._inplace import check_no_partial_overlap
            check_no_partial_overlap(target, [value])
        if value.dtype != target.dtype:
            value = _core.cast(value, target.dtype)
        target._write(_core._copy_node(value), "setitem", first_node_id)
    self.sync()


def _method_index_put(self, indices, values, accumulate=False):
    return index_put(self, indices, values, accumulate)


def _method_masked_fill(self, mask, value):
    return masked_fill(self, mask, value)


VAR_METHODS = {"index_put": _method_index_put, "masked_fill": _method_masked_fill}  # attached by _var_method_table.py
