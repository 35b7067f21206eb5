"""Embedding lookup: a reindex of the weight table with the integer indices as an extra input, so the gradient
of the weight is the matching scatter-add (reindex_reduce) of the output gradient into the looked-up rows."""
from .. import _core
from .._core import Var
from .conv import _is_integer

__all__ = ["embedding"]

_INTEGER_DTYPES = ("int8", "uint8", "int32", "int64")


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """Rows of weight [num_embeddings, embedding_dim] picked by the integer Var input (any shape); the result has
    shape input.shape + (embedding_dim,), as torch.nn.functional.embedding.

    The row padding_idx gets no gradient (its value is still read). Indices outside [0, num_embeddings) raise an
    IndexError when input is already computed; on a lazy input they read zeros. `sparse` is accepted but the
    gradient is always dense (the same values). max_norm and scale_grad_by_freq are not supported."""
    if not isinstance(input, Var):
        raise TypeError(f"embedding: input must be a metajit Var of integer indices, got {type(input).__name__}")
    if not isinstance(weight, Var):
        raise TypeError(f"embedding: weight must be a metajit Var, got {type(weight).__name__}")
    if input.dtype not in _INTEGER_DTYPES:
        raise TypeError(f"embedding: input must hold integer indices, got dtype {input.dtype}")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape "
                         f"{tuple(weight.shape)}")
    if max_norm is not None:
        raise NotImplementedError("embedding: max_norm (renormalising weight rows in place) is not supported")
    if scale_grad_by_freq:
        raise NotImplementedError("embedding: scale_grad_by_freq is not supported")
    rows, width = weight.shape
    if padding_idx is not None:
        if not _is_integer(padding_idx) or not -rows <= padding_idx < rows:
            raise ValueError(f"embedding: padding_idx must be an int within num_embeddings ({rows}), got "
                             f"{padding_idx!r}")
        padding_idx = int(padding_idx) % rows
    if input.is_computed and input.numel() > 0:
        # A cheap check on values that already exist; a lazy input is not forced here.
        values = input.numpy()
        low, high = int(values.min()), int(values.max())
        if low < 0 or high >= rows:
            raise IndexError(f"embedding: index {low if low < 0 else high} is out of range for {rows} embeddings")

    table = weight
    if padding_idx is not None:
        # Same values, but the padding row is read through a detached copy, so its gradient is zero.
        from .. import arange
        is_padding = arange(0, rows, 1, "int64").reshape([rows, 1]) == padding_idx
        table = _core.where(is_padding, weight.detach(), weight)

    indices = input.reshape([1]) if input.ndim == 0 else input
    lookup = "@e0(" + ",".join(f"i{d}" for d in range(indices.ndim)) + ")"
    output = _core.reindex(table, list(indices.shape) + [width], [lookup, f"i{indices.ndim}"], 0.0, [], [indices])
    return output.reshape([width]) if input.ndim == 0 else output
