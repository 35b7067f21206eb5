"""normalize, cosine_similarity and pairwise_distance with PyTorch's signatures, from norms and sums."""
from .. import where
from .reduction import norm
from .tensor import _as_var, _normalize_dim

__all__ = ["normalize", "cosine_similarity", "pairwise_distance"]


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
