"""More element-wise functions with PyTorch's names, each a composition of existing elementwise ops: the inverse
hyperbolic functions, erfc, logit, xlogy, sinc, copysign, heaviside, fmax / fmin, float_power, logaddexp2,
the NaN-skipping sums and means, and PyTorch's alternative spellings (absolute, arccos, multiply, divide, ...).
Nothing here computes on the host; gradients come from the ops each is built from."""
import math

from .. import _core, where
from .._core import Var
from .tensor import _as_var

__all__ = ["acosh", "asinh", "atanh", "arccos", "arcsin", "arctan", "arccosh", "arcsinh", "arctanh", "absolute",
           "negative", "positive", "multiply", "subtract", "divide", "true_divide", "floor_divide", "erfc", "logit",
           "xlogy", "sinc", "deg2rad", "rad2deg", "copysign", "signbit", "sgn", "heaviside", "fmax", "fmin",
           "float_power", "logaddexp2", "isneginf", "isposinf", "isreal", "nansum", "nanmean"]


def _float(input):
    """Integer and bool inputs of a floating function compute in float32, as PyTorch's."""
    input = _as_var(input)
    return input if input.dtype.startswith("float") else _core.cast(input, "float32")


def acosh(input):
    input = _float(input)
    return (input + (input * input - 1.0).sqrt()).log()


def asinh(input):
    # sign(x) * log(|x| + sqrt(x^2 + 1)): the odd form keeps large negative inputs from cancelling to log(0).
    input = _float(input)
    magnitude = input.abs()
    return (magnitude + (magnitude * magnitude + 1.0).sqrt()).log() * where(input < 0, -1.0, 1.0)


def atanh(input):
    input = _float(input)
    return 0.5 * ((1.0 + input) / (1.0 - input)).log()


def arccos(input):
    return _as_var(input).acos()


def arcsin(input):
    return _as_var(input).asin()


def arctan(input):
    return _as_var(input).atan()


arccosh, arcsinh, arctanh = acosh, asinh, atanh


def absolute(input):
    return _as_var(input).abs()


def negative(input):
    return -_as_var(input)


def positive(input):
    return _as_var(input)


def multiply(input, other):
    return _as_var(input) * other


def subtract(input, other, *, alpha=1):
    return _as_var(input) - (other * alpha if alpha != 1 else other)


def divide(input, other, *, rounding_mode=None):
    """input / other; rounding_mode 'trunc' rounds toward zero, 'floor' down (PyTorch's torch.div)."""
    input = _as_var(input)
    if rounding_mode is None:
        return input / other
    if rounding_mode == "floor":
        return input // other
    if rounding_mode == "trunc":
        quotient = input / other
        return quotient.trunc() if input.dtype.startswith("float") else _core.cast(quotient.trunc(), input.dtype)
    raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                     f"'{rounding_mode}'")


def true_divide(input, other):
    return _as_var(input) / other


def floor_divide(input, other):
    return _as_var(input) // other


def erfc(input):
    return 1.0 - _float(input).erf()


def logit(input, eps=None):
    """log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given."""
    input = _float(input)
    if eps is not None:
        input = input.clamp(eps, 1.0 - eps)
    return (input / (1.0 - input)).log()


def xlogy(input, other):
    """input * log(other), 0 where input is 0 (unless other is NaN)."""
    input, other = _float(input), _float(other)
    logarithm = other.log()
    # Where input is 0 an infinite log counts as 0, so the value is 0 and the gradient with respect to input is
    # log(other), as PyTorch's; a NaN other still gives NaN.
    logarithm = where((input == 0) & (logarithm.abs() == float("inf")), 0.0, logarithm)
    return input * logarithm


def sinc(input):
    """sin(pi x) / (pi x), 1 at 0."""
    input = _float(input)
    scaled = input * math.pi
    safe = where(input == 0, 1.0, scaled)  # keeps the untaken branch (and its gradient) finite at 0
    return where(input == 0, 1.0, safe.sin() / safe)


def deg2rad(input):
    return _float(input) * (math.pi / 180.0)


def rad2deg(input):
    return _float(input) * (180.0 / math.pi)


def signbit(input):
    """True where the sign bit is set, -0.0 included (1 / -0.0 is -inf)."""
    input = _as_var(input)
    if not input.dtype.startswith("float"):
        return input < 0
    return (input < 0) | ((input == 0) & (1.0 / input < 0))


def copysign(input, other):
    """|input| with the sign of other (-0.0 counts as negative)."""
    magnitude = _float(input).abs()
    other = _as_var(other) if isinstance(other, Var) else _as_var(float(other))
    return where(signbit(other), -magnitude, magnitude)


def sgn(input):
    return _as_var(input).sign()


def heaviside(input, values):
    """0 below zero, 1 above, `values` at zero."""
    input, values = _as_var(input), _as_var(values)
    one, zero = _core.constant([], values.dtype, 1), _core.constant([], values.dtype, 0)
    return where(input > 0, one, where(input == 0, values, zero))


def fmax(input, other):
    """Elementwise maximum that ignores a NaN when the other value is a number."""
    input, other = _as_var(input), _as_var(other)
    larger = input.maximum(other)
    return where(input != input, other, where(other != other, input, larger))


def fmin(input, other):
    input, other = _as_var(input), _as_var(other)
    smaller = input.minimum(other)
    return where(input != input, other, where(other != other, input, smaller))


def float_power(input, exponent):
    """input ** exponent computed in float64, as PyTorch's."""
    input = _core.cast(_as_var(input), "float64")
    if isinstance(exponent, Var):
        exponent = _core.cast(exponent, "float64")
    return input ** exponent


def logaddexp2(input, other):
    """log2(2^input + 2^other), without overflow."""
    input, other = _float(input), _float(other)
    larger = input.maximum(other)
    return larger + ((-(input - other).abs()) * math.log(2.0)).exp().log1p() / math.log(2.0)


def isneginf(input):
    input = _as_var(input)
    return input == float("-inf") if input.dtype.startswith("float") else input != input


def isposinf(input):
    input = _as_var(input)
    return input == float("inf") if input.dtype.startswith("float") else input != input


def isreal(input):
    """Always True: metajit has no complex dtypes."""
    input = _as_var(input)
    return _core.constant(list(input.shape), "bool", True)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """sum with NaNs counted as zero."""
    input = _as_var(input)
    if dtype is not None:
        input = _core.cast(input, dtype)
    cleaned = where(input != input, 0.0, input) if input.dtype.startswith("float") else input
    return cleaned.sum() if dim is None else cleaned.sum(dim, keepdim)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """mean over the elements that are not NaN (NaN where there are none)."""
    input = _as_var(input)
    if dtype is not None:
        input = _core.cast(input, dtype)
    present = _core.cast(input == input, input.dtype)
    total = nansum(input, dim, keepdim)
    count = present.sum() if dim is None else present.sum(dim, keepdim)
    return total / count


# Also Tensor methods (x.logit(), x.nansum(1), ...) where Var has none yet; attached by _var_method_table.py.
VAR_METHODS_IF_ABSENT = {_name: globals()[_name] for _name in __all__}
