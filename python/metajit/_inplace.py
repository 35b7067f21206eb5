"""In-place methods: PyTorch's trailing-underscore names (x.add_(y), x.zero_(), x.clamp_(0, 1), ...) and the
augmented operators (x += y). Each builds the out-of-place result lazily and writes it into the Var with
Var._write (meta_ops/var.h): the Var, and every view or alias of the same values, holds the result from then on,
while ops recorded earlier keep the values they read. Nothing is computed here; this module must not sync.

PyTorch's rules are kept: the result may not need a larger shape than the Var's (the broadcast shape error), an
integer or bool Var refuses a floating-point result, and a leaf that requires grad refuses in-place ops while
grad mode is on (use `with mj.no_grad():` or write through `.data`).
"""
from . import _core
from ._core import Var

_FLOATING = ("float16", "float32", "float64")
_TORCH_DTYPE_NAMES = {"float16": "Half", "float32": "Float", "float64": "Double", "int8": "Char", "uint8": "Byte",
                      "int32": "Int", "int64": "Long", "bool": "Bool"}


def _as_var_like(self, value):
    if isinstance(value, Var):
        return value
    from . import array, full
    if isinstance(value, (bool, int, float)):
        return full([], value, self.dtype)
    return array(value, dtype=self.dtype)


def write(self, result, operation, first_node_id=0):
    """Makes `self` hold `result` (lazy), checking PyTorch's shape and dtype rules; returns self. first_node_id
    (_core.next_node_id() before `result` was recorded) exempts the op's own reads of self's old value from the
    version check."""
    result = _as_var_like(self, result)
    if tuple(result.shape) != tuple(self.shape):
        try:
            result = _core.broadcast_to(result, list(self.shape))
        except (ValueError, RuntimeError):
            raise RuntimeError(f"{operation}: output with shape {list(self.shape)} doesn't match the broadcast "
                               f"shape {list(result.shape)}") from None
    if result.dtype != self.dtype and not _can_cast(result.dtype, self.dtype):
        raise RuntimeError(f"{operation}: result type {_TORCH_DTYPE_NAMES[result.dtype]} can't be cast to the "
                           f"desired output type {_TORCH_DTYPE_NAMES[self.dtype]}")
    self._write(result, operation, first_node_id)
    return self


def check_no_partial_overlap(self, inputs):
    """PyTorch's refusal to write a Var while reading another that shares some of its elements."""
    for value in inputs:
        if isinstance(value, Var) and self._partially_overlaps(value):
            raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor "
                               "refer to a single memory location. Please clone() the tensor before performing the "
                               "operation.")


def _can_cast(source, target):
    """PyTorch's rule for in-place results: no floating value into an integer Var, nothing but bool into bool."""
    if source in _FLOATING and target not in _FLOATING:
        return False
    return target != "bool" or source == "bool"


def _first_own_node(self, operands):
    """The first_node_id that exempts the op's own reads of self's old value: PyTorch saves self's old value for
    the op's gradient where it needs it, so later writes do not touch it. Not when another operand is self
    itself (x.mul_(x), x *= x[:]): PyTorch saves that operand, the tensor the op then writes, and its backward
    refuses; 0 exempts nothing, so metajit's does too."""
    for value in operands:
        if isinstance(value, Var) and self._fully_overlaps(value):
            return 0
    return _core.next_node_id()


def _from_out_of_place(name, compute, checks_overlap=True):
    """An in-place method `name` writing compute(self, *args, **kwargs) into self."""
    def method(self, *args, **kwargs):
        operands = list(args) + list(kwargs.values())
        if checks_overlap:
            check_no_partial_overlap(self, operands)
        first_node_id = _first_own_node(self, operands)
        return write(self, compute(self, *args, **kwargs), name, first_node_id)
    method.__name__ = name
    method.__doc__ = f"In place: self becomes {name[:-1]}(self, ...) (lazy; every alias of self sees it)."
    return method


def _augmented(name, operator):
    def method(self, other):
        check_no_partial_overlap(self, [other])
        first_node_id = _first_own_node(self, [other])
        return write(self, operator(self, other), name, first_node_id)
    method.__name__ = name
    return method


def copy_(self, src, non_blocking=False):
    """Copies src's values (broadcast to self's shape, cast to its dtype) into self. As in PyTorch, src may be
    self (nothing happens) but not share only some of its elements."""
    if src is self:  # PyTorch: nothing changes, but it is still a write (a leaf refuses, the version moves)
        self._count_write("copy_")
        return self
    check_no_partial_overlap(self, [src])
    src = _as_var_like(self, src)
    if tuple(src.shape) != tuple(self.shape):
        src = _core.broadcast_to(src, list(self.shape))
    if src.dtype != self.dtype:
        src = _core.cast(src, self.dtype)
    self._write(_core._copy_node(src), "copy_")
    return self


def fill_(self, value):
    if isinstance(value, Var) and value.ndim != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                           "dimensions.")
    from . import full
    value = value if isinstance(value, Var) else full([], value, self.dtype)
    self._write(_core.broadcast_to(_core.cast(value, self.dtype), list(self.shape)), "fill_")
    return self


def zero_(self):
    return fill_(self, 0)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    from . import randn
    return copy_(self, randn(*self.shape, dtype=self.dtype) * std + mean)


def uniform_(self, a=0.0, b=1.0, *, generator=None):
    from . import rand
    return copy_(self, rand(*self.shape, dtype=self.dtype) * (b - a) + a)


def _divide(self, other, rounding_mode=None):
    if rounding_mode is None:
        return self / other
    if rounding_mode == "floor":
        return self // other
    if rounding_mode == "trunc":
        return (self / other).trunc() if hasattr(Var, "trunc") else self // other
    raise ValueError(f"div_ expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'")


def _unary(name):
    return lambda self: getattr(self, name)()


def in_place_var_methods():
    """The in-place methods (x.add_(y), x.clamp_(...), x += y, ...), written with the out-of-place ops already on
    Var; for _var_method_table.py, after the ops."""
    from .ops import pointwise, tensor, indexing
    methods = {
        "copy_": copy_, "fill_": fill_, "zero_": zero_, "normal_": normal_, "uniform_": uniform_,
        "add_": _from_out_of_place("add_", lambda self, other, alpha=1:
                                   self + (other * alpha if alpha != 1 else other)),
        "sub_": _from_out_of_place("sub_", lambda self, other, alpha=1:
                                   self - (other * alpha if alpha != 1 else other)),
        "mul_": _from_out_of_place("mul_", lambda self, other: self * other),
        "div_": _from_out_of_place("div_", _divide),
        "pow_": _from_out_of_place("pow_", lambda self, exponent: self ** exponent),
        "clamp_": _from_out_of_place("clamp_", lambda self, min=None, max=None: tensor.clamp(self, min, max)),
        "clamp_min_": _from_out_of_place("clamp_min_", lambda self, min: pointwise.clamp_min(self, min)),
        "clamp_max_": _from_out_of_place("clamp_max_", lambda self, max: pointwise.clamp_max(self, max)),
        "masked_fill_": _from_out_of_place("masked_fill_", checks_overlap=False,
                                           compute=lambda self, mask, value: indexing.masked_fill(self, mask, value)),
        "lerp_": _from_out_of_place("lerp_", lambda self, end, weight: pointwise.lerp(self, end, weight)),
        "addcmul_": _from_out_of_place("addcmul_", lambda self, tensor1, tensor2, value=1:
                                       pointwise.addcmul(self, tensor1, tensor2, value=value)),
        "addcdiv_": _from_out_of_place("addcdiv_", lambda self, tensor1, tensor2, value=1:
                                       pointwise.addcdiv(self, tensor1, tensor2, value=value)),
        "scatter_": _from_out_of_place("scatter_", checks_overlap=False,
                                       compute=lambda self, dim, index, src=None, value=None, reduce=None:
                                       tensor.scatter(self, dim, index, src, value=value, reduce=reduce)),
        "index_put_": _from_out_of_place("index_put_", checks_overlap=False,
                                         compute=lambda self, indices, values, accumulate=False:
                                         indexing.index_put(self, indices, values, accumulate)),
        "maximum_": _from_out_of_place("maximum_", lambda self, other: self.maximum(other)),
        "minimum_": _from_out_of_place("minimum_", lambda self, other: self.minimum(other)),
    }
    for name in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "floor",
                 "ceil", "round", "log1p", "expm1", "log2", "log10", "erf", "tan", "asin", "acos", "atan", "sinh",
                 "cosh", "reciprocal", "sign", "trunc", "frac", "square", "logical_not", "bitwise_not"):
        if hasattr(Var, name):
            methods[name + "_"] = _from_out_of_place(name + "_", _unary(name))
    # In-place twins of out-of-place methods that keep self's shape (x.index_add_(...), x.logit_(), ...).
    for name in ("index_add", "index_copy", "index_fill", "masked_scatter", "scatter_reduce", "scatter_add",
                 "nan_to_num", "logit", "xlogy", "sinc", "deg2rad", "rad2deg", "copysign", "heaviside", "float_power",
                 "acosh", "asinh", "atanh", "arccos", "arcsin", "arctan", "arccosh", "arcsinh", "arctanh", "absolute",
                 "negative", "multiply", "subtract", "divide", "true_divide", "floor_divide", "sgn", "erfc", "exp2",
                 "fmod", "remainder", "hypot", "atan2", "arctan2", "eq", "ne", "lt", "le", "gt", "ge", "tril", "triu",
                 "cumsum", "cumprod", "clip", "logical_and", "logical_or", "logical_xor", "bitwise_and",
                 "bitwise_or", "bitwise_xor"):
        if hasattr(Var, name) and not hasattr(Var, name + "_") and name + "_" not in methods:
            methods[name + "_"] = _from_out_of_place(
                name + "_", lambda self, *args, _name=name, **kwargs: getattr(self, _name)(*args, **kwargs),
                checks_overlap=name not in ("index_add", "index_copy", "index_fill", "masked_scatter",
                                            "scatter_reduce", "scatter_add"))
    for name, operator in {
        "__iadd__": lambda a, b: a + b, "__isub__": lambda a, b: a - b, "__imul__": lambda a, b: a * b,
        "__itruediv__": lambda a, b: a / b, "__ifloordiv__": lambda a, b: a // b, "__imod__": lambda a, b: a % b,
        "__ipow__": lambda a, b: a ** b, "__iand__": lambda a, b: a & b, "__ior__": lambda a, b: a | b,
        "__ixor__": lambda a, b: a ^ b,
    }.items():
        methods[name] = _augmented(name, operator)
    return methods
