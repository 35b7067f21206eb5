"""Element-wise functions with PyTorch's names that are compositions of the elementwise meta-op: the float
classifiers isnan / isinf / isfinite, nan_to_num, sign, reciprocal, square, trunc / frac, fmod / remainder,
atan2, hypot, logaddexp, lerp, addcmul / addcdiv and clamp_min / clamp_max (also as Var methods)."""
import numpy as np

import math

from .. import _core, where
from .._core import Var
from .tensor import _as_var

__all__ = ["isnan", "isinf", "isfinite", "nan_to_num", "sign", "reciprocal", "square", "trunc", "fix", "frac",
           "fmod", "remainder", "atan2", "arctan2", "hypot", "logaddexp", "lerp", "addcmul", "addcdiv", "clamp_min",
           "clamp_max", "eq", "ne", "lt", "le", "gt", "ge", "exp2"]


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


def trunc(input):
    """Rounds toward zero (integers unchanged); its gradient is zero."""
    input = _as_var(input)
    if not _floating(input):
        return input
    return where(input < 0, input.ceil(), input.floor())


fix = trunc


def frac(input):
    """x - trunc(x), with x's sign; the gradient passes through unchanged, as in PyTorch."""
    input = _as_var(input)
    return input - trunc(input).detach()


def remainder(input, other):
    """Python's modulo: the result has the divisor's sign (the % operator)."""
    return _as_var(input) % other


def fmod(input, other):
    """C's fmod: the result has the dividend's sign, |result| < |other|. Computed as |x| mod |y| with x's sign
    put back (the modulo of two non-negative numbers is exact)."""
    input = _as_var(input)
    magnitude = abs(input) % abs(other if not isinstance(other, Var) else other)
    return where(input < 0, -magnitude, magnitude)


def atan2(input, other):
    """The angle of the point (other, input) in (-pi, pi], from atan of the smaller ratio so it stays accurate in
    every octant; atan2(+-0, x) follows the sign of x as in C (0 or pi)."""
    y, x = _as_var(input), _as_var(other)
    if not _floating(y):
        y = _core.cast(y, "float32")
    steep = abs(y) > abs(x)
    # The ratio of the smaller to the larger magnitude (<= 1); a 0 / 0 is taken as 0 (the other branch is unused).
    small = where(steep, x, y)
    large = where(steep, y, x)
    ratio = small / where(large == 0, 1.0, large)
    # Both infinite: inf / inf is nan, the angle is a diagonal's.
    both_infinite = (abs(small) == math.inf) & (abs(large) == math.inf)
    ratio = where(both_infinite, where((small < 0) != (large < 0), -1.0, 1.0), ratio)
    angle = where(steep, where(y > 0, math.pi / 2, -math.pi / 2) - ratio.atan(), ratio.atan())
    # The left half-plane: rotate by pi toward the sign of y, -0 counting as negative (1 / -0 is -inf).
    left = ~steep & ((x < 0) | ((x == 0) & (1.0 / x < 0)))
    below = (y < 0) | ((y == 0) & (1.0 / y < 0))
    return where(left, where(below, angle - math.pi, angle + math.pi), angle)


arctan2 = atan2


def hypot(input, other):
    """sqrt(x^2 + y^2) without overflowing for large x, y: the larger magnitude times sqrt(1 + ratio^2)."""
    x, y = abs(_as_var(input)), abs(_as_var(other))
    large = where(x > y, x, y)
    small = where(x > y, y, x)
    ratio = small / where(large == 0, 1.0, large)
    return large * (ratio * ratio + 1.0).sqrt()


def logaddexp(input, other):
    """log(exp(x) + exp(y)) without overflow: max(x, y) + log1p(exp(-|x - y|)); equal infinities give that
    infinity."""
    x, y = _as_var(input), _as_var(other)
    larger = where(x > y, x, y)
    gap = where(x == y, 0.0, -abs(x - y))  # x == y also covers inf == inf, where x - y would be nan
    return larger + gap.exp().log1p()


def lerp(input, end, weight):
    """input + weight * (end - input)."""
    input = _as_var(input)
    return input + weight * (end - input)


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2."""
    product = _as_var(tensor1) * tensor2
    return _as_var(input) + (product if value == 1 else product * value)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2."""
    quotient = _as_var(tensor1) / tensor2
    return _as_var(input) + (quotient if value == 1 else quotient * value)


def eq(input, other):
    """Elementwise ==, as torch.eq (mj.equal is the same; PyTorch's torch.equal is a single bool)."""
    return _as_var(input) == other


def ne(input, other):
    return _as_var(input) != other


def lt(input, other):
    return _as_var(input) < other


def le(input, other):
    return _as_var(input) <= other


def gt(input, other):
    return _as_var(input) > other


def ge(input, other):
    return _as_var(input) >= other


def exp2(input):
    """2 ** x (exact at integers: exp of x * ln 2 would not be)."""
    input = _as_var(input)
    if not _floating(input):
        input = _core.cast(input, "float32")
    return _core.constant([], input.dtype, 2.0) ** input


def clamp_min(input, min):
    """max(input, min) with clamp's NaN and gradient rules."""
    from .tensor import clamp
    return clamp(input, min=min)


def clamp_max(input, max):
    """min(input, max) with clamp's NaN and gradient rules."""
    from .tensor import clamp
    return clamp(input, max=max)


VAR_METHODS = {"isnan": isnan, "isinf": isinf, "isfinite": isfinite, "nan_to_num": nan_to_num,
               "sign": sign, "reciprocal": reciprocal, "square": square, "trunc": trunc, "fix": trunc,
               "frac": frac, "fmod": fmod, "remainder": remainder, "atan2": atan2, "arctan2": atan2,
               "hypot": hypot, "logaddexp": logaddexp, "lerp": lerp, "addcmul": addcmul,
               "addcdiv": addcdiv, "clamp_min": clamp_min, "clamp_max": clamp_max}  # attached by _var_method_table.py
