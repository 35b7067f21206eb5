"""Var methods written in Python on top of _core: shape ops, basic slicing, reductions, numpy protocol."""
from . import _core
from ._core import Var


def _dims(dims):
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        return list(dims[0])
    return list(dims)


def reshape(self, *shape):
    return _core.reshape(self, _dims(shape))


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


def mean(self, dim=None, keepdim=False):
    total = _core.reduce(self, "add", dim, keepdim)
    count = 1
    dims = range(self.ndim) if dim is None else ([dim] if isinstance(dim, int) else dim)
    for d in dims:
        count *= self.shape[d]
    if total.dtype not in ("float16", "float32", "float64"):
        total = _core.cast(total, "float32")
    return total / count


def _normalize_index(index, extent, dim):
    if index < -extent or index >= extent:
        raise IndexError(f"index {index} is out of bounds for dimension {dim} with size {extent}")
    return index + extent if index < 0 else index


def getitem(self, key):
    """Basic indexing: integers, slices (any step, negative too), None and Ellipsis."""
    if not isinstance(key, tuple):
        key = (key,)
    for item in key:
        if not (item is None or item is Ellipsis or isinstance(item, (int, slice))) or isinstance(item, bool):
            raise TypeError(f"index {item!r} of type {type(item).__name__} is not supported yet: only integers, "
                            "slices, None and ... (integer-array and boolean indexing come with the operator library)")
    if sum(item is Ellipsis for item in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for item in key if item is not None and item is not Ellipsis)
    if consumed > self.ndim:
        raise IndexError(f"too many indices for a Var of rank {self.ndim}: {consumed} were given")
    expanded = []
    for item in key:
        if item is Ellipsis:
            expanded.extend([slice(None)] * (self.ndim - consumed))
        else:
            expanded.append(item)
    expanded.extend([slice(None)] * (self.ndim - sum(1 for item in expanded if item is not None)))
    shape, mapping, dim = [], [], 0
    for item in expanded:
        if item is None:
            shape.append(1)
            continue
        extent = self.shape[dim]
        if isinstance(item, int):
            mapping.append((-1, 0, _normalize_index(item, extent, dim)))
        else:
            start, stop, step = item.indices(extent)
            length = len(range(start, stop, step))
            mapping.append((len(shape), step, start if length else 0))
            shape.append(length)
        dim += 1
    return _core.view(self, shape, mapping)


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


for _name, _function in {
    "reshape": reshape, "view": reshape, "permute": permute, "transpose": transpose, "broadcast_to": broadcast_to,
    "astype": astype, "sum": _reduction("add"), "prod": _reduction("mul"), "max": _reduction("max"),
    "min": _reduction("min"), "mean": mean, "__getitem__": getitem, "__array__": __array__,
    "__bool__": _scalar(bool), "__float__": _scalar(float), "__int__": _scalar(int), "maximum": maximum,
    "minimum": minimum, "__iter__": __iter__,
}.items():
    setattr(Var, _name, _function)
Var.T = property(lambda self: _core.permute(self, list(range(self.ndim))[::-1]))
Var.size = property(lambda self: self.numel())
Var.__array_priority__ = 1000  # numpy defers to Var's reflected operators
