"""Element-wise functions with PyTorch's names that are compositions of the elementwise meta-op: the float
classifiers isnan / isinf / isfinite, nan_to_num, sign, reciprocal and square (also as Var methods)."""
import numpy as np

from .. import _core, where
from .._core import Var
from .tensor import _as_var

__all__ = ["isnan", "isinf", "isfinite", "nan_to_num", "sign", "reciprocal", "square"]


def _floating(input):
    return input.dtype.startswith("float")


def isnan(input):
    """True where the element is NaN (never for integers and bools)."""
    input = _as_var(input)
    return input != input if _floating(input) else _core.constant(list(input.shape), "bool", False)


def isinf(input):
    """True where the element is +inf or -inf."""
    input = _as_var(input)
    if not _floating(input):
        return _core.constant(list(input.shape), "bool", False)
    return abs(input) == float("inf")


def isfinite(input):
    """True where the element is neither NaN nor infinite (always for integers and bools)."""
    input = _as_var(input)
    if not _floating(input):
        return _core.constant(list(input.shape), "bool", True)
    return (input - input) == 0  # inf - inf and nan - nan are nan


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN -> `nan`, +inf -> `posinf`, -inf -> `neginf`; by default the dtype's largest and lowest finite
    values, as in PyTorch. Integers and bools come back unchanged."""
    input = _as_var(input)
    if not _floating(input):
        return input
    limits = np.finfo(input.dtype)
    posinf = float(limits.max) if posinf is None else posinf
    neginf = float(limits.min) if neginf is None else neginf
    result = where(input != input, nan, input)
    result = where(input == float("inf"), posinf, result)
    return where(input == float("-inf"), neginf, result)


def sign(input):
    """-1, 0 or 1 by the element's sign, in its dtype; 0 for NaN (PyTorch's (0 < x) - (x < 0)). Its gradient
    is zero."""
    input = _as_var(input)
    if input.dtype == "bool":
        return input
    positive = _core.cast(input > 0, input.dtype)
    negative = _core.cast(input < 0, input.dtype)
    return (positive - negative).detach()


def reciprocal(input):
    """1 / x; integer inputs give float32, as in PyTorch."""
    input = _as_var(input)
    if not _floating(input):
        input = _core.cast(input, "float32")
    return 1.0 / input


def square(input):
    """x * x (bools give int64, as in PyTorch)."""
    input = _as_var(input)
    if input.dtype == "bool":
        input = _core.cast(input, "int64")
    return input * input


for _name, _function in {"isnan": isnan, "isinf": isinf, "isfinite": isfinite, "nan_to_num": nan_to_num,
                         "sign": sign, "reciprocal": reciprocal, "square": square}.items():
    setattr(Var, _name, _function)
