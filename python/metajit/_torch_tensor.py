"""torch.Tensor methods that ported programs call and metajit spells differently or lacked: x.size(),
f-strings with a format spec, x.device, x.type(...), x.new_tensor/new_full/new_empty, is_floating_point,
element_size, get_device, ndimension, mT, and the tensor-type objects (mj.FloatTensor, ...).

Each is a thin composition of what Var already has; nothing here computes on its own or adds graph ops.
"""
import numpy as np

from . import _core
from ._core import Var

_TENSOR_TYPES = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
                 "LongTensor": "int64", "IntTensor": "int32", "CharTensor": "int8", "ByteTensor": "uint8",
                 "BoolTensor": "bool"}
_TYPE_OF_DTYPE = {dtype: name for name, dtype in _TENSOR_TYPES.items()}


class Size(tuple):
    """torch.Size: the shape as a tuple (x.size()); numel() is the product of the extents."""

    def numel(self):
        return int(np.prod(self, dtype=np.int64))

    def __repr__(self):
        return f"metajit.Size({list(self)})"


class TensorType:
    """mj.FloatTensor and friends: x.type(mj.FloatTensor) casts, mj.FloatTensor([1, 2]) builds a Var of that
    dtype (mj.FloatTensor(2, 3) one of zeros: values are never uninitialised here), and
    isinstance(x, mj.FloatTensor) checks the dtype."""

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype

    def __call__(self, *data):
        from . import array, zeros
        if len(data) == 1 and not isinstance(data[0], int):
            return array(data[0].numpy() if isinstance(data[0], Var) else data[0], dtype=self.dtype)
        return zeros(*data, dtype=self.dtype)

    def __instancecheck__(self, value):
        return isinstance(value, Var) and value.dtype == self.dtype

    def __str__(self):
        return f"metajit.{self.name}"

    __repr__ = __str__


tensor_types = {name: TensorType(name, dtype) for name, dtype in _TENSOR_TYPES.items()}


def size(self, dim=None):
    """x.size() is the shape (a Size, a tuple); x.size(d) one extent (negative d counts from the end). The
    element count is x.numel()."""
    if dim is None:
        return Size(self.shape)
    if not isinstance(dim, (int, np.integer)):
        raise TypeError(f"size: dim must be an integer, got {type(dim).__name__}")
    if not -self.ndim <= dim < max(self.ndim, 1):
        raise IndexError(f"size: dimension {dim} is out of range for a {self.ndim}-d Var of shape "
                         f"{list(self.shape)}")
    return self.shape[dim] if self.ndim else 1


def __format__(self, spec):
    """f"{loss:.4f}": a one-element Var formats as its number (computing it); other Vars use str()."""
    if not spec:
        return str(self)
    if self.numel() != 1:
        raise TypeError(f"unsupported format string {spec!r} for a Var of shape {list(self.shape)}: "
                        "only one-element Vars format as numbers (use .numpy() for arrays)")
    return format(self.item(), spec)


def _data_of(data):
    return data.numpy() if isinstance(data, Var) else data


def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    """A new leaf Var holding a copy of `data`, with this Var's dtype unless dtype is given."""
    from . import array
    from ._device import checked
    checked(device, "new_tensor")
    result = array(np.array(_data_of(data)), dtype=dtype or self.dtype)
    if requires_grad:
        result.requires_grad = True
    return result


def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    from . import full
    from ._device import checked
    checked(device, "new_full")
    return full(tuple(size), fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    """Zero-filled, like mj.empty: values are never uninitialised here."""
    from . import zeros
    from ._device import checked
    checked(device, "new_empty")
    return zeros(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)


def is_floating_point(self):
    return self.dtype.startswith("float")


def element_size(self):
    return np.dtype(self.dtype).itemsize


def get_device(self):
    """-1 for a value on the CPU, else the GPU's index (0), as in PyTorch."""
    return -1 if device_property(self).type == "cpu" else 0


def device_property(self):
    from ._device import device_of
    return device_of(self)


def cast_to_type(self, dtype=None, non_blocking=False):
    """x.type() names the tensor type ('metajit.FloatTensor'); x.type(t) casts to t (a dtype, a name such as
    'torch.LongTensor', or mj.LongTensor)."""
    if dtype is None:
        return f"metajit.{_TYPE_OF_DTYPE.get(self.dtype, self.dtype)}"
    if isinstance(dtype, TensorType):
        name = dtype.dtype
    elif isinstance(dtype, str) and dtype.rsplit(".", 1)[-1] in _TENSOR_TYPES:
        name = _TENSOR_TYPES[dtype.rsplit(".", 1)[-1]]
    else:
        from . import _dtype_name
        name = _dtype_name(dtype)
    return self if self.dtype == name else _core.cast(self, name)


def matrix_transpose(self):
    """x.mT: the last two dims swapped."""
    if self.ndim < 2:
        raise ValueError(f"mT: needs at least 2 dims, got a Var of shape {list(self.shape)}")
    return self.transpose(-2, -1)


# Memory-placement calls of a data pipeline: a Var's memory is already what they ask for (pageable host memory
# is what metajit copies from; a forked DataLoader worker shares nothing with the engine).
def _returns_self(self, *args, **kwargs):
    return self



def _missing_attribute(self, name):
    """Var.__getattr__, only reached when normal lookup fails: a PyTorch Tensor method metajit leaves out says so
    and why (the reasons are in _absent.py)."""
    from ._absent import absent_method
    raise absent_method(name)


VAR_METHODS = {  # attached by _var_method_table.py
    "size": size, "__format__": __format__, "new_tensor": new_tensor, "new_full": new_full,
    "new_empty": new_empty, "is_floating_point": is_floating_point, "element_size": element_size,
    "get_device": get_device, "device": property(device_property), "type": cast_to_type,
    "ndimension": lambda self: self.ndim,
    "mT": property(matrix_transpose),
    "pin_memory": _returns_self, "share_memory_": _returns_self,
    "is_pinned": lambda self: False, "is_shared": lambda self: False,
    "__getattr__": _missing_attribute,
}


def function_var_methods():
    """Tensor methods that are the top-level function with the Var first (x.addmm(a, b) is mj.addmm(x, a, b)),
    for the functions that exist at the top level but are not yet methods; for _var_method_table.py, last."""
    import metajit
    methods = {}
    spellings = {"addmm": "addmm", "baddbmm": "baddbmm", "outer": "outer", "cross": "cross", "kron": "kron",
                 "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
                 "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
                 "isclose": "isclose", "equal": "equal", "true_divide": "div", "floor_divide": "floor_div",
                 "greater": "greater", "greater_equal": "greater_equal", "less": "less", "less_equal": "less_equal",
                 "not_equal": "not_equal", "dot": "dot", "mv": "mv", "inner": "inner", "vdot": "vdot", "ger": "ger",
                 "addmv": "addmv", "addr": "addr", "addbmm": "addbmm", "dist": "dist", "exp2": "exp2",
                 "hardshrink": "hardshrink", "prelu": "prelu", "multinomial": "multinomial"}
    for method, function_name in spellings.items():
        if hasattr(Var, method):
            continue
        function = getattr(metajit, function_name)

        def method_of(self, *args, _function=function, **kwargs):
            return _function(self, *args, **kwargs)
        method_of.__name__ = method
        method_of.__doc__ = f"mj.{function_name}(self, ...)"
        methods[method] = method_of
    # Their in-place twins (x.addmm_(a, b), x.greater_(y), ...), written through _inplace like the others.
    from ._inplace import _from_out_of_place
    for method in ("addmm", "baddbmm", "addmv", "addr", "addbmm", "greater", "greater_equal", "less", "less_equal",
                   "not_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                   "bitwise_xor", "exp2"):
        if (hasattr(Var, method) or method in methods) and not hasattr(Var, method + "_"):
            methods[method + "_"] = _from_out_of_place(
                method + "_", lambda self, *args, _method=method, **kwargs: getattr(self, _method)(*args, **kwargs))
    if not hasattr(Var, "reshape_as"):
        methods["reshape_as"] = lambda self, other: self.reshape(list(other.shape))
    return methods
