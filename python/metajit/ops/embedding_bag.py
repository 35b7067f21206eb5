"""embedding_bag: sums, means or maxima of bags of embedding rows, as torch.nn.functional.embedding_bag. A bag is
a row of a 2-D index Var, or a run of a 1-D one between offsets. The bags are laid out as a padded
(bags, longest bag) index table built on the host from the offsets (they are small integers the caller already
has), so the lookup is one embedding gather and the reduction one masked reduce: both differentiable, no loop.
Must not read the embedding weights on the host.
"""
import numpy as np

from .. import _core, array, where
from .._core import Var
from .embedding import embedding

__all__ = ["embedding_bag"]

_MODES = ("sum", "mean", "max")


def _bags(input, offsets, include_last_offset):
    """(indices (bags, length), positions (bags, length) into input, mask (bags, length)) for a 1-D input."""
    if offsets is None:
        raise ValueError("embedding_bag: offsets has to be a 1D Tensor but got None (a 1-D input needs offsets)")
    starts = np.asarray(offsets.numpy() if isinstance(offsets, Var) else offsets, dtype=np.int64).reshape(-1)
    count = input.shape[0]
    if starts.size == 0 or starts[0] != 0:
        raise ValueError(f"embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has "
                         f"to start from position 0. However, got {starts[0] if starts.size else 'no offsets'}")
    if (np.diff(starts) < 0).any() or starts[-1] > count:
        raise ValueError(f"embedding_bag: offsets must be non-decreasing and at most the input's length {count}, "
                         f"got {starts.tolist()}")
    ends = np.append(starts[1:], count)
    if include_last_offset:
        starts, ends = starts[:-1], starts[1:]
    lengths = ends - starts
    longest = max(int(lengths.max()) if lengths.size else 0, 1)
    positions = starts[:, None] + np.arange(longest)[None, :]
    mask = np.arange(longest)[None, :] < lengths[:, None]
    return np.where(mask, positions, 0), mask


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Reduces embedding(input, weight) over each bag: mode 'sum', 'mean' or 'max'. input (B, N) holds B bags of
    N indices (offsets must be None), or input (N,) holds bags that start at `offsets`. per_sample_weights
    (input's shape; mode 'sum' only) scale each row first. Entries equal to padding_idx are left out (of the
    mean's count too). An empty bag gives zeros. Returns (B, embedding_dim)."""
    if mode not in _MODES:
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError("embedding_bag: max_norm and scale_grad_by_freq are not supported")
    if not isinstance(input, Var):
        input = array(np.asarray(input, dtype=np.int64))
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                  "on GitHub.")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2D, then offsets has to be None, as input is treated is "
                             "a mini-batch of fixed length sequences.")
        indices, mask = input, None
        weights = per_sample_weights
    elif input.ndim == 1:
        positions, mask_array = _bags(input, offsets, include_last_offset)
        position_var = array(positions)
        indices = input[position_var]
        mask = array(mask_array)
        weights = per_sample_weights[position_var] if per_sample_weights is not None else None
    else:
        raise ValueError(f"embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    rows = weight.shape[0]
    keep = mask
    if padding_idx is not None:
        padding_idx = int(padding_idx) % rows
        not_padding = indices != padding_idx
        keep = not_padding if keep is None else keep & not_padding
    vectors = embedding(indices, weight)  # (bags, length, dim)
    if weights is not None:
        vectors = vectors * weights.unsqueeze(-1)
    if keep is None:
        if mode == "sum":
            return vectors.sum(1)
        if mode == "mean":
            return vectors.mean(1)
        return vectors.amax(1)
    kept = keep.unsqueeze(-1)
    if mode == "max":
        lowest = where(kept, vectors, float("-inf")).amax(1)
        return where(keep.any(1).unsqueeze(-1), lowest, 0.0)
    total = where(kept, vectors, 0.0).sum(1)
    if mode == "sum":
        return total
    count = _core.cast(keep, weight.dtype).sum(1, keepdim=True)
    return total / count.clamp_min(1.0)
