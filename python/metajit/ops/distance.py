"""normalize, cosine_similarity, pairwise_distance and cdist with PyTorch's signatures, from norms and sums."""
from .. import where
from .reduction import norm
from .tensor import _as_var, _normalize_dim

__all__ = ["normalize", "cosine_similarity", "pairwise_distance", "cdist", "pdist"]


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """input / max(||input||_p over dim, eps)."""
    input = _as_var(input)
    lengths = norm(input, p, dim=_normalize_dim(dim, input.ndim, "normalize"), keepdim=True)
    return input / where(lengths > eps, lengths, eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) over `dim` (the operands broadcast)."""
    x1, x2 = _as_var(x1), _as_var(x2)
    product = x1 * x2
    dim = _normalize_dim(dim, product.ndim, "cosine_similarity")
    # Broadcast both first, so each norm runs over the same dims as the dot product.
    x1, x2 = x1.broadcast_to(list(product.shape)), x2.broadcast_to(list(product.shape))
    first, second = norm(x1, dim=dim), norm(x2, dim=dim)
    return product.sum(dim) / (where(first > eps, first, eps) * where(second > eps, second, eps))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim."""
    difference = _as_var(x1) - x2 + eps
    return norm(difference, p, dim=difference.ndim - 1, keepdim=keepdim)


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between every row of x1 (..., P, M) and every row of x2 (..., R, M): (..., P, R),
    the batch dims broadcasting. Always computed from the differences (PyTorch's 'donot_use_mm' mode), which is
    the more accurate of its two ways; the other modes are accepted and give the same numbers to rounding."""
    x1, x2 = _as_var(x1), _as_var(x2)
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"cdist: unknown compute_mode {compute_mode!r} (one of {', '.join(_CDIST_MODES)})")
    if x1.ndim < 2 or x2.ndim < 2:
        raise ValueError(f"cdist: x1 and x2 need at least 2 dims, got shapes {list(x1.shape)} and {list(x2.shape)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"cdist: x1 and x2 must have the same number of columns, got {x1.shape[-1]} and "
                         f"{x2.shape[-1]}")
    if not (isinstance(p, (int, float)) and not isinstance(p, bool)) or p < 0:
        raise ValueError(f"cdist: p must be a non-negative number, got {p!r}")
    difference = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return norm(difference, p, dim=difference.ndim - 1)


def pdist(input, p=2.0):
    """The p-norm distances between every pair of rows i < j of an [N, M] input, in row-major pair order (the
    upper triangle of cdist without its diagonal)."""
    import numpy as np
    input = _as_var(input)
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    first, second = np.triu_indices(input.shape[0], 1)  # pair numbering depends only on N
    if first.size == 0:
        return input[:0, 0]
    difference = input.index_select(0, first.astype(np.int64)) - input.index_select(0, second.astype(np.int64))
    return norm(difference, p, 1)
