"""More products with PyTorch's names: inner, vdot, ger (outer's old name), addmv, addr, addbmm, chain_matmul,
tensordot and dist. Compositions of matmul, outer, sums and norms, so gradients come from those."""
import numpy as np

from .linalg import matmul, mv, outer
from .reduction import norm
from .tensor import _as_var

__all__ = ["inner", "vdot", "ger", "addmv", "addr", "addbmm", "chain_matmul", "tensordot", "dist"]


def inner(input, other):
    """Sum over the last dims of both (a scalar times a tensor for 0-d inputs)."""
    input, other = _as_var(input), _as_var(other)
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    return tensordot(input, other, ([input.ndim - 1], [other.ndim - 1]))


def vdot(input, other):
    input, other = _as_var(input), _as_var(other)
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return (input * other).sum()


def ger(input, vec2):
    return outer(input, vec2)


def _scaled_sum(input, product, beta, alpha):
    result = product if alpha == 1 else product * alpha
    if beta == 0:
        return result  # PyTorch ignores input (even NaNs in it) when beta is 0
    return (input if beta == 1 else input * beta) + result


def addmv(input, mat, vec, *, beta=1, alpha=1):
    return _scaled_sum(_as_var(input), mv(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    return _scaled_sum(_as_var(input), outer(vec1, vec2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (sum over the batch of batch1[i] @ batch2[i])."""
    return _scaled_sum(_as_var(input), matmul(batch1, batch2).sum(0), beta, alpha)


def chain_matmul(*matrices):
    result = _as_var(matrices[0])
    for matrix in matrices[1:]:
        result = matmul(result, matrix)
    return result


def tensordot(a, b, dims=2):
    """Contracts the last `dims` dims of a with the first `dims` of b, or the dims listed in ([a's], [b's]), as a
    matrix product of the rearranged operands."""
    a, b = _as_var(a), _as_var(b)
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        a_dims, b_dims = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        a_dims, b_dims = ([dims_list] if isinstance(dims_list, int) else list(dims_list) for dims_list in dims)
        a_dims = [dim % a.ndim for dim in a_dims]
        b_dims = [dim % b.ndim for dim in b_dims]
    for a_dim, b_dim in zip(a_dims, b_dims):
        if a.shape[a_dim] != b.shape[b_dim]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[a_dim]} in dim "
                               f"{a_dim} and second has size {b.shape[b_dim]} in dim {b_dim}")
    a_free = [dim for dim in range(a.ndim) if dim not in a_dims]
    b_free = [dim for dim in range(b.ndim) if dim not in b_dims]
    contracted = int(np.prod([a.shape[dim] for dim in a_dims]))
    left = a.permute(a_free + a_dims).reshape([-1, contracted])
    right = b.permute(b_dims + b_free).reshape([contracted, -1])
    return matmul(left, right).reshape([a.shape[dim] for dim in a_free] + [b.shape[dim] for dim in b_free])


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast), flattened."""
    return norm((_as_var(input) - other).reshape([-1]), p)
