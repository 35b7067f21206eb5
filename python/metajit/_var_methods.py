"""Var methods written in Python on top of _core: shape ops, indexing (x[key] and x[key] = value, implemented in
ops/indexing.py), reductions, numpy protocol."""
from . import _core
from ._core import Var


def _dims(dims):
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        return list(dims[0])
    return list(dims)


def reshape(self, *shape):
    """A view of self when its layout allows one (PyTorch's rule; writes through it change self), else a copy."""
    return _core.reshape(self, _dims(shape))


def view(self, *shape):
    """A view of self with another shape (writes through it change self); raises, as PyTorch does, when self's
    layout (a transpose, a strided slice) cannot be viewed that way: use reshape() then."""
    return _core.view_reshape(self, _dims(shape))


def stride(self, dim=None):
    """PyTorch's strides of this Var, in elements: a base is row-major; views have their base's layout."""
    strides = self._strides()
    return strides if dim is None else strides[dim]


def permute(self, *dims):
    return _core.permute(self, _dims(dims))


def transpose(self, dim0=0, dim1=1):
    return _core.transpose(self, dim0, dim1)


def broadcast_to(self, *shape):
    return _core.broadcast_to(self, _dims(shape))


def astype(self, dtype):
    from . import _dtype_name
    return _core.cast(self, _dtype_name(dtype))


def _reduction(op):
    def method(self, dim=None, keepdim=False):
        return _core.reduce(self, op, dim, keepdim)
    method.__name__ = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}[op]
    method.__doc__ = f"Reduces with {op} over `dim` (int, sequence, or None for all dims)."
    return method


def _extreme(op):
    """x.max() / x.min() as PyTorch's: no dim gives the 0-d extreme; an int dim gives the named tuple (values,
    indices) (indices: the first extreme along dim, NaN counting as one; computed only if read, like any lazy
    value); a Var gives the elementwise maximum / minimum. Several dims at once: x.amax(dims) / x.amin(dims)."""
    name = {"max": "max", "min": "min"}[op]

    def method(self, dim=None, keepdim=False):
        from .ops.tensor import argmax, argmin
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(): keepdim needs a dim (use amax/amin over all dims to keep them)")
            return _core.reduce(self, op, None, False)
        if isinstance(dim, Var):
            return _core.binary("maximum" if op == "max" else "minimum", self, dim)
        if isinstance(dim, (list, tuple)):
            raise TypeError(f"{name}() takes one dim and returns (values, indices), as in PyTorch; got {dim!r}: "
                            f"use a{name}({list(dim)!r}) for the {name} over several dims")
        values = _core.reduce(self, op, [dim], keepdim)
        indices = (argmax if op == "max" else argmin)(self, dim, keepdim)
        return (_MaxResult if op == "max" else _MinResult)(values, indices)
    method.__name__ = name
    method.__doc__ = _extreme.__doc__
    return method


def _named_result(name):
    import collections
    result = collections.namedtuple(name, ["values", "indices"])
    result.__module__ = "metajit.return_types"
    return result


_MaxResult = _named_result("max")
_MinResult = _named_result("min")


def _reduce_over(op, name):
    def method(self, dim=(), keepdim=False):
        dims = None if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0) else dim
        return _core.reduce(self, op, dims, keepdim)
    method.__name__ = name
    method.__doc__ = f"The {op} over `dim` (int or sequence; () or None for every dim), values only."
    return method


def mean(self, dim=None, keepdim=False):
    total = _core.reduce(self, "add", dim, keepdim)
    count = 1
    dims = range(self.ndim) if dim is None else ([dim] if isinstance(dim, int) else dim)
    for d in dims:
        count *= self.shape[d]
    if total.dtype not in ("float16", "float32", "float64"):
        total = _core.cast(total, "float32")
    return total / count


def _cast_to(dtype):
    def convert(self):
        return self if self.dtype == dtype else _core.cast(self, dtype)
    convert.__name__ = {"float32": "float", "float64": "double", "float16": "half", "int32": "int",
                        "int64": "long", "bool": "bool", "uint8": "byte"}[dtype]
    convert.__doc__ = f"This Var as {dtype} (itself when it already is)."
    return convert


def type_as(self, other):
    return self if self.dtype == other.dtype else _core.cast(self, other.dtype)


def t(self):
    """The transpose of a matrix; a 0-d or 1-d Var is returned as is (PyTorch's rule)."""
    if self.ndim > 2:
        raise ValueError(f"t() expects a Var with at most 2 dimensions, got shape {list(self.shape)} "
                         "(use transpose(dim0, dim1) or permute)")
    return self if self.ndim < 2 else _core.transpose(self, 0, 1)


def contiguous(self):
    """Itself when its layout is row-major, else a Var holding the same values that is no view of self (PyTorch
    copies there; here no copy is made until a kernel reads it, since values never change under a Var)."""
    return self if self.is_contiguous() else _core._unaliased(self)


def clone(self):
    """A new Var with the same value and gradient flow, sharing nothing with self: later writes to either are
    not seen by the other."""
    return _core.reindex(self, list(self.shape), [f"i{dim}" for dim in range(self.ndim)], 0.0, [], [])


def expand(self, *sizes):
    """Broadcast to `sizes` (PyTorch's expand): -1 keeps that dim's extent; new leading dims may be added."""
    sizes = _dims(sizes)
    if len(sizes) < self.ndim:
        raise ValueError(f"expand: the number of sizes ({len(sizes)}) must be at least the number of "
                         f"dimensions ({self.ndim}), shape {list(self.shape)}")
    offset = len(sizes) - self.ndim
    shape = []
    for position, size in enumerate(sizes):
        if size == -1:
            if position < offset:
                raise ValueError(f"expand: -1 is not allowed for a new leading dimension (position {position})")
            size = self.shape[position - offset]
        shape.append(size)
    return _core.broadcast_to(self, shape)


def expand_as(self, other):
    return _core.broadcast_to(self, list(other.shape))


def view_as(self, other):
    return _core.view_reshape(self, list(other.shape))


def new_zeros(self, *size, dtype=None):
    from . import zeros
    return zeros(*size, dtype=dtype or self.dtype)


def new_ones(self, *size, dtype=None):
    from . import ones
    return ones(*size, dtype=dtype or self.dtype)


def tolist(self):
    return self.numpy().tolist()


def dim(self):
    return self.ndim


def unbind(self, dim=0):
    """The slices along `dim`, that dim removed, as a tuple."""
    from .ops.layout import select
    extent = self.shape[dim] if self.ndim else 0
    return tuple(select(self, dim, index) for index in range(extent))


def where(self, condition, other):
    """mj.where(condition, self, other)."""
    from . import where as choose
    return choose(condition, self, other)


def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    """x.to(dtype), x.to("cpu"), x.to("cuda"), x.to(mj.device(...)), x.to(other) (its dtype), x.to(device,
    dtype). A dtype casts. A device moves the value like x.cuda(), or x.cpu() when the GPU holds it (a value
    already on the host stays lazy: moving it to the CPU has nothing to do)."""
    from . import _DTYPE_NAMES, _dtype_name
    from ._device import checked, device as device_type
    for argument in args:
        if isinstance(argument, Var):
            dtype = argument.dtype
        elif isinstance(argument, (device_type, int)) or (isinstance(argument, str) and argument not in _DTYPE_NAMES):
            device = argument
        else:
            dtype = argument
    result = self
    if dtype is not None:
        name = _dtype_name(dtype)
        result = self if self.dtype == name else _core.cast(self, name)
    device = checked(device, "to")
    if device is not None:
        if device.type == "cuda":
            result = result.cuda()
        elif _core.value_on_device(result):
            result = result.cpu()
    if copy and result is self:
        result = self.clone()
    return result


def cpu(self):
    """Computes the value and makes sure the host holds it (a copy from the GPU, when it was made there), so
    the next x.numpy() is free. Returns x: where kernels run is mj.flags.use_cuda's choice (docs/cuda.md)."""
    self.sync()
    _core.move_to_host(self)
    return self


def _cuda(self, *args, **kwargs):
    """Computes the value and copies it to the GPU now, if it is not there yet (a dataset before the training
    loop, say); returns x. Raises mj.CudaUnavailableError without a GPU. Kernels run on the GPU when
    mj.flags.use_cuda is set (docs/cuda.md); a value then moves to the GPU by itself the first time a kernel
    reads it."""
    from . import cuda
    cuda.require_gpu("x.cuda()")
    self.sync()
    _core.move_to_device(self)
    return self


def _is_cuda(self):
    """True when the GPU holds the value (it was computed there, or copied by x.cuda() or a GPU kernel)."""
    return bool(_core.value_on_device(self))


def __deepcopy__(self, memo):
    """copy.deepcopy(x), and so of a Module: a new leaf holding a copy of the value (computed now), with the
    same dtype and requires_grad; a Parameter's copy is a Parameter."""
    from . import array
    from .nn import parameter
    copy = array(self.numpy().copy(), dtype=self.dtype)
    copy.requires_grad = self.requires_grad
    if parameter._is_parameter(self):
        parameter._mark(copy)
    memo[id(self)] = copy
    return copy


def _arithmetic(name, operator):
    def method(self, other, *, alpha=None):
        if alpha is not None:
            other = other * alpha
        return operator(self, other)
    method.__name__ = name
    method.__doc__ = f"self {name} other (times alpha, when given), as the operator does."
    return method


def _indexing():
    """metajit.ops.indexing, imported on first use (it imports metajit itself); an import statement in getitem
    cost a seventh of a slice."""
    global _indexing_module
    if _indexing_module is None:
        from .ops import indexing
        _indexing_module = indexing
    return _indexing_module


_indexing_module = None


def getitem(self, key):
    """x[key]: integers, slices (any step), None, ..., integer arrays (lists, numpy arrays, Vars; negative entries
    count from the end) and boolean masks, with PyTorch's semantics. Keys of integers and slices give a view;
    index arrays give a reindex (differentiable: its gradient scatter-adds). A boolean mask Var is synced, since
    the result's shape depends on how many entries are true. Implemented in metajit.ops.indexing."""
    return _indexing().getitem(self, key)


def setitem(self, key, value):
    """x[key] = value (any key getitem accepts), with PyTorch's semantics: x and every view of the same values
    see the change, and gradients flow to both the old x and `value`. The new value is computed now.
    Implemented in metajit.ops.indexing."""
    from .ops import indexing
    indexing.setitem(self, key, value)


def __array__(self, dtype=None, copy=None):
    result = self.numpy()
    if dtype is not None and result.dtype != dtype:
        return result.astype(dtype)
    if copy:
        return result.copy()
    return result


def _scalar(kind):
    def convert(self):
        if self.numel() != 1:
            raise ValueError(f"only a Var with one element can be converted to a Python {kind.__name__}; "
                             f"this one has shape {self.shape}")
        return kind(self.item())
    return convert


def maximum(self, other):
    return _core.binary("maximum", self, other)


def minimum(self, other):
    return _core.binary("minimum", self, other)


def __iter__(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d Var")
    return (self[index] for index in range(self.shape[0]))


VAR_METHODS = {
    "reshape": reshape, "view": view, "stride": stride, "permute": permute, "transpose": transpose,
    "broadcast_to": broadcast_to,
    "astype": astype, "sum": _reduction("add"), "prod": _reduction("mul"), "max": _extreme("max"),
    "min": _extreme("min"), "amax": _reduce_over("max", "amax"), "amin": _reduce_over("min", "amin"), "mean": mean,
    "__getitem__": getitem, "__setitem__": setitem,
    "__array__": __array__,
    "__bool__": _scalar(bool), "__float__": _scalar(float), "__int__": _scalar(int), "maximum": maximum,
    "minimum": minimum, "__iter__": __iter__,
    "float": _cast_to("float32"), "double": _cast_to("float64"), "half": _cast_to("float16"),
    "int": _cast_to("int32"), "long": _cast_to("int64"), "bool": _cast_to("bool"), "type_as": type_as, "t": t,
    "contiguous": contiguous, "clone": clone, "expand": expand, "expand_as": expand_as, "view_as": view_as,
    "new_zeros": new_zeros, "new_ones": new_ones, "tolist": tolist,
    "add": _arithmetic("add", lambda a, b: a + b), "sub": _arithmetic("sub", lambda a, b: a - b),
    "mul": lambda self, other: self * other, "div": lambda self, other: self / other,
    "pow": lambda self, exponent: self ** exponent,
    "byte": _cast_to("uint8"), "dim": dim, "nelement": lambda self: self.numel(), "unbind": unbind,
    "where": where, "to": to, "cpu": cpu, "cuda": _cuda, "is_cuda": property(_is_cuda), "__deepcopy__": __deepcopy__,
    "eq": lambda self, other: self == other, "ne": lambda self, other: self != other,
    "lt": lambda self, other: self < other, "le": lambda self, other: self <= other,
    "gt": lambda self, other: self > other, "ge": lambda self, other: self >= other,
    "mm": lambda self, other: self @ other, "bmm": lambda self, other: self @ other,
    "T": property(lambda self: _core.permute(self, list(range(self.ndim))[::-1])),
    "__array_priority__": 1000,  # numpy defers to Var's reflected operators
}  # attached by _var_method_table.py
