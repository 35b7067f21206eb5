"""Variance and standard deviation with PyTorch's names and signatures: var, std, var_mean, std_mean, and the
Var methods x.var() and x.std().

Two passes (the mean, then the sum of squared deviations), not sum(x^2) - sum(x)^2 / n, which loses every
significant digit when the mean is large against the spread. The divisor is max(0, n - correction), as in
PyTorch: a correction that leaves nothing to divide by gives inf, or nan for 0 / 0.
"""
import warnings

from .. import _core
from .tensor import _as_var, _normalize_dims

__all__ = ["var", "std", "var_mean", "std_mean"]


def _correction(name, unbiased, correction):
    if unbiased is not None and correction is not None:
        raise ValueError(f"{name}: pass either unbiased= or correction=, not both")
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def _arguments(name, input, dim, unbiased, correction):
    # PyTorch's older overload var(input, unbiased): a bool in dim's place.
    if isinstance(dim, bool):
        if unbiased is not None:
            raise TypeError(f"{name}: unbiased given twice (as dim={dim} and unbiased={unbiased})")
        dim, unbiased = None, dim
    input = _as_var(input)
    if not input.dtype.startswith("float"):
        raise TypeError(f"{name}: expected a floating-point input, got {input.dtype} (std and var only support "
                        "floating-point dtypes; cast first)")
    dims = list(range(input.ndim)) if dim is None else _normalize_dims(dim, input.ndim, name)
    if not dims:  # dim=[] reduces over every dim, as in PyTorch
        dims = list(range(input.ndim))
    return input, dims, _correction(name, unbiased, correction)


def _variance_and_mean(input, dims, correction, keepdim):
    count = 1
    for axis in dims:
        count *= input.shape[axis]
    if count - correction <= 0:
        warnings.warn(f"var/std: {count} values per result and correction={correction} leave no degrees of "
                      "freedom; the result is inf or nan", stacklevel=4)
    mean = _core.reduce(input, "add", dims, True) / count
    deviation = input - mean
    variance = _core.reduce(deviation * deviation, "add", dims, keepdim) / max(0, count - correction)
    if not keepdim:
        mean = mean.reshape([extent for axis, extent in enumerate(input.shape) if axis not in dims])
    return variance, mean


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over `dim` (an int, a sequence, or None for every dim), divided by n - correction
    (correction=1 by default, Bessel's correction; unbiased=False means correction=0)."""
    input, dims, correction = _arguments("var", input, dim, unbiased, correction)
    return _variance_and_mean(input, dims, correction, keepdim)[0]


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation: the square root of var with the same arguments."""
    input, dims, correction = _arguments("std", input, dim, unbiased, correction)
    return _variance_and_mean(input, dims, correction, keepdim)[0].sqrt()


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) over the same dims, computed together."""
    input, dims, correction = _arguments("var_mean", input, dim, unbiased, correction)
    return _variance_and_mean(input, dims, correction, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over the same dims, computed together."""
    input, dims, correction = _arguments("std_mean", input, dim, unbiased, correction)
    variance, mean = _variance_and_mean(input, dims, correction, keepdim)
    return variance.sqrt(), mean


VAR_METHODS = {"var": var, "std": std}  # attached by _var_method_table.py
