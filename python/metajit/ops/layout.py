"""Rearranging and repeating with PyTorch's names: narrow, select, movedim, swapaxes / swapdims, unflatten,
repeat, tile, repeat_interleave, take, diff, diag, meshgrid, pixel_shuffle / pixel_unshuffle and unfold / fold.
Each is a view, a reindex or a reindex-reduce (index expressions over the output's indices), so each fuses with
its neighbours and its gradient follows from the meta-ops' rules."""
from .. import _core
from .._core import Var
from .. import array, where
from .tensor import _as_var, _normalize_dim, cat, index_select

__all__ = ["narrow", "select", "movedim", "moveaxis", "swapaxes", "swapdims", "unflatten", "tile", "repeat_interleave",
           "take", "diff", "diag", "meshgrid", "t", "permute", "reshape", "clone", "numel", "unbind", "pixel_shuffle",
           "pixel_unshuffle", "unfold", "fold", "channel_shuffle"]


def _integer(name, argument, value):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name}: {argument} must be an integer, got {type(value).__name__}")
    return int(value)


def narrow(input, dim, start, length):
    """The `length` elements of `dim` from `start` on (a negative start counts from the end): a view."""
    input = _as_var(input)
    dim = _normalize_dim(dim, input.ndim, "narrow")
    start, length = _integer("narrow", "start", start), _integer("narrow", "length", length)
    extent = input.shape[dim]
    if start < 0:
        start += extent
    if not 0 <= start <= extent or length < 0 or start + length > extent:
        raise IndexError(f"narrow: start {start} and length {length} do not fit dim {dim} of extent {extent}")
    return input[(slice(None),) * dim + (slice(start, start + length),)]


def select(input, dim, index):
    """The slice at `index` of `dim`, that dim removed (x.select(1, 2) is x[:, 2]); a negative index counts from
    the end."""
    input = _as_var(input)
    dim = _normalize_dim(dim, input.ndim, "select")
    index = _integer("select", "index", index)
    extent = input.shape[dim]
    if not -extent <= index < extent:
        raise IndexError(f"select: index {index} is out of range for dim {dim} of extent {extent}")
    return input[(slice(None),) * dim + (index,)]


def unflatten(input, dim, sizes):
    """Splits `dim` into `sizes` (one of them may be -1, inferred)."""
    input = _as_var(input)
    dim = _normalize_dim(dim, input.ndim, "unflatten")
    sizes = [_integer("unflatten", "sizes", size) for size in sizes]
    extent = input.shape[dim]
    if sizes.count(-1) > 1:
        raise ValueError(f"unflatten: only one size may be -1, got {sizes}")
    known = 1
    for size in sizes:
        if size != -1:
            known *= size
    if -1 in sizes:
        if known == 0 or extent % known:
            raise ValueError(f"unflatten: sizes {sizes} do not divide dim {dim} of extent {extent}")
        sizes[sizes.index(-1)] = extent // known
    elif known != extent:
        raise ValueError(f"unflatten: sizes {sizes} multiply to {known}, not dim {dim}'s extent {extent}")
    return input.reshape(list(input.shape[:dim]) + sizes + list(input.shape[dim + 1:]))


def movedim(input, source, destination):
    """Moves the dims at `source` to the positions `destination` (ints or equal-length sequences); the other
    dims keep their order."""
    input = _as_var(input)
    sources = [_normalize_dim(dim, input.ndim, "movedim")
               for dim in ([source] if isinstance(source, int) else list(source))]
    destinations = [_normalize_dim(dim, input.ndim, "movedim")
                    for dim in ([destination] if isinstance(destination, int) else list(destination))]
    if len(set(sources)) != len(sources):
        raise ValueError(f"movedim: source {source} repeats a dim")
    if len(sources) != len(destinations):
        raise ValueError(f"movedim: source {source} and destination {destination} must have the same length")
    if len(set(destinations)) != len(destinations):
        raise ValueError(f"movedim: destination {destination} repeats a dim")
    order = [None] * input.ndim
    for origin, target in zip(sources, destinations):
        order[target] = origin
    rest = iter(dim for dim in range(input.ndim) if dim not in sources)
    order = [next(rest) if origin is None else origin for origin in order]
    return input if order == list(range(input.ndim)) else input.permute(order)


moveaxis = movedim


def swapaxes(input, axis0, axis1):
    """The transpose of two dims (PyTorch's and numpy's other name for transpose)."""
    return _as_var(input).transpose(axis0, axis1)


swapdims = swapaxes


def _repeated(name, input, repeats):
    """input repeated `repeats[d]` times along each dim, leading dims added for extra repeats."""
    input = _as_var(input)
    if len(repeats) == 1 and isinstance(repeats[0], (list, tuple)):
        repeats = tuple(repeats[0])
    repeats = [_integer(name, "repeats", count) for count in repeats]
    if any(count < 0 for count in repeats):
        raise ValueError(f"{name}: repeats must be non-negative, got {repeats}")
    return repeats, input


def _repeat_to(input, repeats):
    added = len(repeats) - input.ndim
    shape = [count * extent for count, extent in zip(repeats, [1] * added + list(input.shape))]
    indexes = [f"i{added + dim} % {extent}" if repeats[added + dim] != 1 else f"i{added + dim}"
               for dim, extent in enumerate(input.shape)]
    if shape == list(input.shape):
        return input
    if any(extent == 0 for extent in shape):
        return _core.constant(shape, input.dtype, 0)
    return _core.reindex(input, shape, indexes, 0.0, [], [])


def _method_repeat(self, *repeats):
    """PyTorch's Tensor.repeat: the whole Var tiled `repeats[d]` times along each dim (at least ndim of them)."""
    repeats, input = _repeated("repeat", self, repeats)
    if len(repeats) < input.ndim:
        raise ValueError(f"repeat: {len(repeats)} repeat counts for a Var of {input.ndim} dims (give at least "
                         f"{input.ndim})")
    return _repeat_to(input, repeats)


def tile(input, dims):
    """Like repeat, with fewer counts than dims filled with 1 at the front (torch.tile)."""
    repeats, input = _repeated("tile", input, tuple(dims) if isinstance(dims, (list, tuple)) else (dims,))
    return _repeat_to(input, [1] * (input.ndim - len(repeats)) + repeats)


def repeat_interleave(input, repeats, dim=None):
    """Each element repeated `repeats` times in place along `dim` (flattened first when dim is None); `repeats`
    is an int, or one count per element (a list, numpy array or Var, read on the host)."""
    input = _as_var(input)
    if dim is None:
        input, dim = input.reshape([input.numel()]), 0
    dim = _normalize_dim(dim, input.ndim, "repeat_interleave")
    extent = input.shape[dim]
    if isinstance(repeats, int) and not isinstance(repeats, bool):
        if repeats < 0:
            raise ValueError(f"repeat_interleave: repeats must be non-negative, got {repeats}")
        shape = list(input.shape)
        shape[dim] = extent * repeats
        if repeats == 0 or extent == 0:
            return _core.constant(shape, input.dtype, 0)
        indexes = [f"i{axis}" if axis != dim else f"i{axis} / {repeats}" for axis in range(input.ndim)]
        return _core.reindex(input, shape, indexes, 0.0, [], [])
    import numpy as np
    counts = np.asarray(repeats.numpy() if isinstance(repeats, Var) else repeats)
    if counts.ndim != 1 or counts.shape[0] != extent or counts.dtype.kind not in "iu" or (counts < 0).any():
        raise ValueError(f"repeat_interleave: repeats must be non-negative integers, one per element of dim {dim} "
                         f"(extent {extent}), got {counts.tolist()}")
    return index_select(input, dim, array(np.repeat(np.arange(extent), counts)))


def take(input, index):
    """Elements of the flattened input at `index` (a Var or array of ints, any shape; negative counts from the
    end), in the index's shape."""
    input = _as_var(input)
    count = input.numel()
    flat = input.reshape([count])
    if not isinstance(index, Var):  # on the host: range-checked here, negatives wrapped
        import numpy as np
        positions = np.asarray(index)
        if positions.dtype.kind not in "iu":
            raise TypeError(f"take: index must hold integers, got {positions.dtype}")
        if positions.size and (positions.min() < -count or positions.max() >= count):
            raise IndexError(f"take: index out of range for an input of {count} elements")
        index = array(np.where(positions < 0, positions + count, positions).astype(np.int64))
    elif not index.dtype.startswith("int") and index.dtype != "uint8":
        raise TypeError(f"take: index must hold integers, got {index.dtype}")
    else:
        index = index.long()
        index = where(index < 0, index + count, index)
    return index_select(flat, 0, index.reshape([index.numel()])).reshape(list(index.shape))


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """Differences of neighbours along `dim`, applied `n` times; `prepend` / `append` are joined first."""
    input = _as_var(input)
    dim = _normalize_dim(dim, input.ndim, "diff")
    n = _integer("diff", "n", n)
    if n < 0:
        raise ValueError(f"diff: n must be non-negative, got {n}")
    pieces = [_as_var(piece) for piece in (prepend, input, append) if piece is not None]
    result = cat(pieces, dim) if len(pieces) > 1 else input
    for _ in range(n):
        extent = result.shape[dim]
        if extent == 0:
            break
        after = result[(slice(None),) * dim + (slice(1, None),)]
        before = result[(slice(None),) * dim + (slice(0, extent - 1),)]
        result = (after != before) if result.dtype == "bool" else after - before
    return result


def diag(input, diagonal=0):
    """A 1-D input becomes a square matrix with it on the `diagonal`-th diagonal (0 elsewhere); a 2-D input
    gives its `diagonal`-th diagonal as a 1-D Var."""
    input = _as_var(input)
    offset = _integer("diag", "diagonal", diagonal)
    if input.ndim == 1:
        size = input.shape[0] + abs(offset)
        index = "i0" if offset >= 0 else "i1"
        return _core.reindex(input, [size, size], [index], 0.0, [f"i1 - i0 != {offset}"], [])
    if input.ndim == 2:
        rows, columns = input.shape
        length = max(0, min(rows, columns - offset) if offset >= 0 else min(rows + offset, columns))
        indexes = ["i0", f"i0 + {offset}"] if offset >= 0 else [f"i0 + {-offset}", "i0"]
        return _core.reindex(input, [length], indexes, 0.0, [], [])
    raise ValueError(f"diag: expected a 1-D or 2-D input, got shape {list(input.shape)}")


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D Vars: with indexing="ij" result k varies along dim k; with "xy" the first two
    dims are swapped (numpy's default)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    tensors = [_as_var(tensor) for tensor in tensors]
    for tensor in tensors:
        if tensor.ndim > 1:
            raise ValueError(f"meshgrid: expected 0-D or 1-D inputs, got shape {list(tensor.shape)}")
    tensors = [tensor.reshape([1]) if tensor.ndim == 0 else tensor for tensor in tensors]
    shape = [tensor.shape[0] for tensor in tensors]
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        order[0], order[1] = 1, 0
    grid_shape = [shape[position] for position in order]
    grids = []
    for number, tensor in enumerate(tensors):
        axis = order.index(number)
        grids.append(_core.reindex(tensor, grid_shape, [f"i{axis}"], 0.0, [], []))
    return tuple(grids)


def t(input):
    return _as_var(input).t()


def permute(input, dims):
    return _as_var(input).permute(list(dims))


def reshape(input, shape):
    return _as_var(input).reshape(list(shape))


def clone(input):
    return _as_var(input).clone()


def numel(input):
    return _as_var(input).numel()


def unbind(input, dim=0):
    return _as_var(input).unbind(dim)


def pixel_shuffle(input, upscale_factor):
    """[*, C * r^2, H, W] -> [*, C, H * r, W * r] (sub-pixel convolution's rearrangement)."""
    input = _as_var(input)
    factor = _integer("pixel_shuffle", "upscale_factor", upscale_factor)
    if input.ndim < 3 or factor < 1 or input.shape[-3] % (factor * factor):
        raise ValueError(f"pixel_shuffle: the channels of shape {list(input.shape)} must be divisible by "
                         f"upscale_factor^2 = {factor * factor}")
    *batch, channels, height, width = input.shape
    out = channels // (factor * factor)
    rank = len(batch)
    split = input.reshape(batch + [out, factor, factor, height, width])
    order = list(range(rank)) + [rank, rank + 3, rank + 1, rank + 4, rank + 2]
    return split.permute(order).reshape(batch + [out, height * factor, width * factor])


def pixel_unshuffle(input, downscale_factor):
    """[*, C, H * r, W * r] -> [*, C * r^2, H, W], the inverse of pixel_shuffle."""
    input = _as_var(input)
    factor = _integer("pixel_unshuffle", "downscale_factor", downscale_factor)
    if input.ndim < 3 or factor < 1 or input.shape[-2] % factor or input.shape[-1] % factor:
        raise ValueError(f"pixel_unshuffle: height and width of shape {list(input.shape)} must be divisible by "
                         f"downscale_factor = {factor}")
    *batch, channels, height, width = input.shape
    rank = len(batch)
    split = input.reshape(batch + [channels, height // factor, factor, width // factor, factor])
    order = list(range(rank)) + [rank, rank + 2, rank + 4, rank + 1, rank + 3]
    return split.permute(order).reshape(batch + [channels * factor * factor, height // factor, width // factor])


def _window(name, kernel_size, dilation, padding, stride):
    """(kernel, dilation, padding, stride) as pairs of non-negative ints (kernel and stride positive)."""
    pairs = []
    for argument, value, least in (("kernel_size", kernel_size, 1), ("dilation", dilation, 1),
                                   ("padding", padding, 0), ("stride", stride, 1)):
        pair = (value, value) if isinstance(value, int) else tuple(value)
        if len(pair) != 2 or any(not isinstance(item, int) or item < least for item in pair):
            raise ValueError(f"{name}: {argument} must be an int or a pair of ints >= {least}, got {value!r}")
        pairs.append(pair)
    return pairs


def _blocks(size, kernel, dilation, padding, stride):
    return [(size[axis] + 2 * padding[axis] - dilation[axis] * (kernel[axis] - 1) - 1) // stride[axis] + 1
            for axis in range(2)]


def _patch_indexes(kernel, dilation, padding, stride):
    """Image row and column of patch element (ki, kj) = (i2, i3) at block (bi, bj) = (i4, i5)."""
    return [f"i4 * {stride[0]} - {padding[0]} + i2 * {dilation[0]}",
            f"i5 * {stride[1]} - {padding[1]} + i3 * {dilation[1]}"]


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: [N, C, H, W] -> [N, C * kh * kw, L], each column one sliding block (zero padding outside)."""
    input = _as_var(input)
    if input.ndim != 4:
        raise ValueError(f"unfold: expected a 4-D input [N, C, H, W], got shape {list(input.shape)}")
    kernel, dilation, padding, stride = _window("unfold", kernel_size, dilation, padding, stride)
    batch, channels, height, width = input.shape
    blocks = _blocks((height, width), kernel, dilation, padding, stride)
    if min(blocks) < 1:
        raise ValueError(f"unfold: the window does not fit the padded input of shape {list(input.shape)}")
    patches = _core.reindex(input, [batch, channels, kernel[0], kernel[1], blocks[0], blocks[1]],
                            ["i0", "i1"] + _patch_indexes(kernel, dilation, padding, stride), 0.0, [], [])
    return patches.reshape([batch, channels * kernel[0] * kernel[1], blocks[0] * blocks[1]])


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, the adjoint of unfold: [N, C * kh * kw, L] -> [N, C, H, W], overlapping blocks summed."""
    input = _as_var(input)
    kernel, dilation, padding, stride = _window("fold", kernel_size, dilation, padding, stride)
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    blocks = _blocks(size, kernel, dilation, padding, stride)
    window = kernel[0] * kernel[1]
    if input.ndim != 3 or input.shape[1] % window or input.shape[2] != blocks[0] * blocks[1]:
        raise ValueError(f"fold: expected an input of shape [N, C * {window}, {blocks[0] * blocks[1]}] for output "
                         f"size {size}, got {list(input.shape)}")
    batch, channels = input.shape[0], input.shape[1] // window
    patches = input.reshape([batch, channels, kernel[0], kernel[1], blocks[0], blocks[1]])
    return _core.reindex_reduce(patches, "add", [batch, channels, size[0], size[1]],
                                ["i0", "i1"] + _patch_indexes(kernel, dilation, padding, stride), [], [])


def _method_select(self, dim, index):
    return select(self, dim, index)


def _method_unflatten(self, dim, sizes):
    return unflatten(self, dim, sizes)


def _method_repeat_interleave(self, repeats, dim=None):
    return repeat_interleave(self, repeats, dim)


def _method_diff(self, n=1, dim=-1, prepend=None, append=None):
    return diff(self, n, dim, prepend, append)


def _method_movedim(self, source, destination):
    return movedim(self, source, destination)


def _method_narrow(self, dim, start, length):
    return narrow(self, dim, start, length)


VAR_METHODS = {"repeat": _method_repeat, "tile": tile, "movedim": _method_movedim,
               "moveaxis": _method_movedim, "swapaxes": swapaxes, "swapdims": swapaxes,
               "narrow": _method_narrow, "diag": diag, "select": _method_select,
               "unflatten": _method_unflatten, "repeat_interleave": _method_repeat_interleave,
               "take": take, "diff": _method_diff}  # attached by _var_method_table.py


def channel_shuffle(input, groups):
    """[N, C, *] with its C channels, seen as groups x (C / groups), transposed to (C / groups) x groups (ShuffleNet's
    channel mixing)."""
    input = _as_var(input)
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with sizes "
                           f"{list(input.shape)}")
    channels = input.shape[1]
    if groups <= 0 or channels % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {channels} channels and {groups} "
                           "groups.")
    rest = list(input.shape[2:])
    grouped = input.reshape([input.shape[0], groups, channels // groups] + rest)
    return grouped.transpose(1, 2).reshape(list(input.shape))
