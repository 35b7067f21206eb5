"""Rearrangements with PyTorch's names: rot90, fliplr, ravel and the Tensor method x.unfold(dim, size, step)
(sliding windows along one dim as a new last dim; F.unfold is im2col and lives in layout.py). Flips, transposes,
reshapes and one reindex, so gradients come from the meta-ops."""
from .. import _core
from .tensor import _as_var, _normalize_dim, flip

__all__ = ["rot90", "fliplr", "ravel"]


def rot90(input, k=1, dims=(0, 1)):
    """Rotates the (dims[0], dims[1]) plane by 90 degrees k times, from dims[0] towards dims[1]."""
    input = _as_var(input)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    first, second = (_normalize_dim(dim, input.ndim, "rot90") for dim in dims)
    if first == second:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {first} and dim1 = {second}")
    turns = k % 4
    if turns == 1:
        return flip(input, [second]).transpose(first, second)
    if turns == 2:
        return flip(input, [first, second])
    if turns == 3:
        return flip(input, [first]).transpose(first, second)
    return input.clone()


def fliplr(input):
    input = _as_var(input)
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, [1])


def ravel(input):
    return _as_var(input).reshape([-1])


def unfold_windows(input, dimension, size, step):
    """x.unfold(dimension, size, step): every window of `size` elements along `dimension`, `step` apart, as a new
    last dim of length size (the windows' count replaces the dim)."""
    input = _as_var(input)
    dim = _normalize_dim(dimension, input.ndim, "unfold")
    extent = input.shape[dim] if input.ndim else 1
    if size > extent:
        raise RuntimeError(f"maximum size for tensor at dimension {dim} is {extent} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if input.ndim == 0:
        return input.reshape([1])
    windows = (extent - size) // step + 1
    rank = input.ndim
    shape = list(input.shape)
    shape[dim] = windows
    indexes = [f"i{axis}" for axis in range(rank)]
    indexes[dim] = f"i{dim} * {step} + i{rank}"
    return _core.reindex(input, shape + [size], indexes, 0.0, [], [])


VAR_METHODS_IF_ABSENT = {**{_name: globals()[_name] for _name in __all__},  # attached by _var_method_table.py
                         "unfold": unfold_windows}
