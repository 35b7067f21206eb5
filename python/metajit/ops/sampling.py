"""Random sampling with PyTorch's names, from the generator mj.seed() seeds: rand_like, randn_like, normal,
randperm and multinomial (with and without replacement)."""
import math

from .. import _core, rand, randn, where
from .._core import Var
from .sorting import argsort, topk
from .tensor import _as_var

__all__ = ["rand_like", "randn_like", "normal", "randperm", "multinomial"]


def rand_like(input, dtype=None):
    return rand(list(input.shape), dtype=dtype or input.dtype)


def randn_like(input, dtype=None):
    return randn(list(input.shape), dtype=dtype or input.dtype)


def normal(mean=0.0, std=1.0, size=None):
    """Normal samples: mean and std numbers (then `size` is the shape) or Vars (broadcast together)."""
    if size is None:
        shape = [1]
        for value in (mean, std):
            if isinstance(value, Var):
                shape = list(value.shape) if shape == [1] else shape
        if not isinstance(mean, Var) and not isinstance(std, Var):
            raise ValueError("normal: give size= when mean and std are numbers")
        size = shape
    return randn(list(size)) * std + mean


def randperm(n, dtype="int64"):
    """A random permutation of 0 .. n-1 (the order of n uniform samples)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"randperm: n must be a non-negative integer, got {n!r}")
    order = argsort(rand(n, dtype="float64"))
    return order if dtype == "int64" else _core.cast(order, str(dtype))


def multinomial(input, num_samples, replacement=False):
    """Indices drawn from each row of non-negative weights `input` ([C] or [N, C]). With replacement, each draw
    inverts the row's cumulative distribution at a uniform sample; without, the num_samples largest of
    log(weight) plus Gumbel noise are a sample without replacement."""
    weights = _as_var(input)
    if weights.ndim not in (1, 2) or not weights.dtype.startswith("float"):
        raise ValueError(f"multinomial: expected float weights of shape [C] or [N, C], got {weights.dtype} "
                         f"{list(weights.shape)}")
    rows = weights if weights.ndim == 2 else weights.reshape([1, weights.shape[0]])
    categories = rows.shape[1]
    if not replacement and num_samples > categories:
        raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement from {categories} "
                         "categories")
    if replacement:
        cumulative = rows.cumsum(1)
        total = cumulative[:, categories - 1:]
        draws = rand([rows.shape[0], num_samples], dtype=rows.dtype) * total  # [N, S]
        # The index is how many cumulative weights lie at or below the draw (never past the last category).
        below = (cumulative.reshape([rows.shape[0], 1, categories]) <= draws.reshape([rows.shape[0], num_samples,
                                                                                     1]))
        result = _core.cast(below, "int64").sum(2)
        result = where(result > categories - 1, categories - 1, result)
    else:
        noise = -(-(rand(list(rows.shape), dtype="float64") + 1e-300).log()).log()  # Gumbel(0, 1)
        keys = where(rows > 0, _core.cast(rows, "float64").log(), -math.inf) + noise
        result = topk(keys, num_samples, dim=1).indices
    return result.detach() if weights.ndim == 2 else result.reshape([num_samples]).detach()
