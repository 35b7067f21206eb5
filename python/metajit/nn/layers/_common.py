"""Helpers shared by the layer modules: argument normalisation and parameter creation."""
import math

from .. import init
from ..parameter import Parameter


def pair(value, count=2):
    """An int or a sequence as a tuple of `count` ints (kernel sizes, strides, paddings)."""
    if isinstance(value, (tuple, list)):
        if len(value) != count:
            raise ValueError(f"expected {count} values, got {tuple(value)}")
        return tuple(value)
    return (value,) * count


def check_positive_int(value, name, owner):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}")


def empty_parameter(shape, dtype):
    """An uninitialised (zero) float parameter; layers fill it with their initialiser."""
    from ... import zeros
    return Parameter(zeros(*shape, dtype=dtype or "float32"))


def default_uniform_(weight, bias, fan_in):
    """PyTorch's default for Linear and convolutions: kaiming_uniform_(a=sqrt(5)) on the weight, which is
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for the bias."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)
