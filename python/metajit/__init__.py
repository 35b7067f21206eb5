"""metajit: a lazy deep-learning framework built from three meta-ops (reindex, reindex-reduce, elementwise).

Operations record a graph; asking for a value (``.numpy()``, ``.item()``, ``mj.sync``) fuses the pending graph
into kernels that are generated as C++, compiled in-process by Clang, cached on disk and run on all cores.
"""
import builtins as _builtins
import os as _os

from . import _core
from ._core import Var, seed, stats, reset_stats, gc

__all__ = [
    "Var", "array", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange", "linspace",
    "randint", "bernoulli", "rand", "randn", "seed",
    "reindex", "reindex_reduce", "reduce", "broadcast", "broadcast_to", "where", "sync", "stats", "reset_stats",
    "flags", "inspect_kernels", "gc", "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
    "stop_grad", "detach", "save", "load", "code", "Function", "inspect", "CompileError", "NonFiniteError", "cache",
    "jit", "export", "load_exported", "ArtifactError",
]

# Frames inside this package are skipped when recording which user line created a node.
_core._set_package_dir(_os.path.dirname(_os.path.abspath(__file__)) + _os.sep)

_DTYPE_NAMES = {"bool", "int8", "uint8", "int32", "int64", "float16", "float32", "float64"}


def _dtype_name(dtype):
    """Accepts 'float32', numpy dtypes/types and Python types; returns the canonical name."""
    if dtype is None:
        return None
    if isinstance(dtype, str):
        return dtype
    if dtype is float:
        return "float32"
    if dtype is int:
        return "int64"
    if dtype is bool:
        return "bool"
    import numpy as np
    return np.dtype(dtype).name


def _shape_argument(shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        return list(shape[0])
    return list(shape)


def _leaf(var, requires_grad):
    if requires_grad:
        var.requires_grad = True
    return var


def array(data, dtype=None, requires_grad=False):  # noqa: F811  (a parameter; mj.data, imported below, is a package)
    """A Var holding a copy of `data` (numpy array, nested lists or a number).

    numpy arrays and scalars keep their dtype; Python floats become float32 and Python ints int64, as in PyTorch.
    requires_grad=True makes it a leaf that backward() fills ``.grad`` of."""
    import numpy as np
    if isinstance(data, Var):
        result = data
    else:
        if not isinstance(data, (np.ndarray, np.generic)):
            data = np.asarray(data)
            if data.dtype == np.float64:
                data = data.astype(np.float32)
        result = _core.array(np.asarray(data))
    if dtype is not None and result.dtype != _dtype_name(dtype):
        result = _core.cast(result, _dtype_name(dtype))
    return _leaf(result, requires_grad)


def full(shape, value, dtype=None, requires_grad=False):
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float32"
    result = _core.constant(list(shape) if not isinstance(shape, int) else [shape], _dtype_name(dtype), value)
    return _leaf(result, requires_grad)


def zeros(*shape, dtype="float32", requires_grad=False):
    return full(_shape_argument(shape), 0, dtype, requires_grad)


def ones(*shape, dtype="float32", requires_grad=False):
    return full(_shape_argument(shape), 1, dtype, requires_grad)


def zeros_like(x, dtype=None, requires_grad=False):
    return full(list(x.shape), 0, dtype or x.dtype, requires_grad)


def ones_like(x, dtype=None, requires_grad=False):
    return full(list(x.shape), 1, dtype or x.dtype, requires_grad)


def full_like(x, value, dtype=None, requires_grad=False):
    return full(list(x.shape), value, dtype or x.dtype, requires_grad)


def linspace(start, end, steps, dtype=None, requires_grad=False):
    """`steps` evenly spaced values from start to end inclusive (float32 unless dtype says otherwise)."""
    import numpy as np
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"linspace: steps must be a non-negative integer, got {steps!r}")
    values = np.linspace(float(start), float(end), int(steps), dtype=np.float64)
    return array(values, dtype=_dtype_name(dtype) or "float32", requires_grad=requires_grad)


def arange(start, stop=None, step=1, dtype=None):
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        # The builtin: the operator library's star import below binds `all` here to mj.all.
        dtype = "int64" if _builtins.all(isinstance(v, int) for v in (start, stop, step)) else "float32"
    return _core.arange(float(start), float(stop), float(step), _dtype_name(dtype))


def rand(*shape, dtype="float32", requires_grad=False):
    """Uniform [0, 1) samples, drawn from the generator seeded by mj.seed()."""
    return _leaf(_core.rand(_shape_argument(shape), _dtype_name(dtype)), requires_grad)


def randn(*shape, dtype="float32", requires_grad=False):
    """Standard normal samples, drawn from the generator seeded by mj.seed()."""
    return _leaf(_core.randn(_shape_argument(shape), _dtype_name(dtype)), requires_grad)


def randint(low, high=None, size=None, dtype="int64", requires_grad=False):
    """Uniform integers in [low, high) (randint(high, size) starts at 0), from the generator of mj.seed()."""
    if size is None:
        if high is None or not isinstance(high, (list, tuple)):
            raise TypeError("randint: give randint(high, size) or randint(low, high, size)")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    uniform = _core.rand(_shape_argument((size,)), "float64")
    return _core.cast((uniform * float(high - low)).floor() + float(low), _dtype_name(dtype))


def bernoulli(input, p=None):
    """1 with probability p (each element of input, or the number p), else 0, in input's dtype."""
    probability = input if p is None else p
    shape = list(input.shape)
    draw = _core.rand(shape, "float32" if input.dtype == "float16" else input.dtype)
    return _core.cast(draw < probability, input.dtype).detach()


def _python_number(value):
    """`value` as a Python bool/int/float if it is one (numpy scalars included), else None."""
    import numpy as np
    if isinstance(value, np.generic):
        value = value.item()
    return value if isinstance(value, (bool, int, float)) else None


def _category(dtype):
    return 0 if dtype == "bool" else 2 if dtype.startswith("float") else 1


def _scalar_var(number, tensor_dtype=None):
    """A 0-d Var for a Python number. Next to a tensor it takes the tensor's dtype unless it is of a higher category
    (PyTorch's scalar rule, as in binary ops); alone it gets the default dtype (bool, int64, float32)."""
    default = "bool" if isinstance(number, bool) else "int64" if isinstance(number, int) else "float32"
    if tensor_dtype is not None and _category(default) <= _category(tensor_dtype):
        return full([], number, tensor_dtype)
    return full([], number, default)


def where(condition, x, y):
    """x where condition is true, else y (numpy broadcasting). Python numbers follow the scalar promotion rule:
    where(c, 1, -1) is int64, where(c, 5, float32_tensor) is float32."""
    condition = condition if isinstance(condition, Var) else array(condition)
    x_number, y_number = _python_number(x), _python_number(y)
    if x_number is None:
        x = array(x)
    if y_number is None:
        y = array(y)
    if x_number is not None:
        x = _scalar_var(x_number, None if y_number is not None else y.dtype)
    if y_number is not None:
        y = _scalar_var(y_number, None if x_number is not None else x.dtype)
    return _core.where(condition, x, y)


def reindex(x, shape, indexes, overflow_value=0, overflow_conditions=(), extras=()):
    """One-to-many: y[i0..iN] = x[indexes[0](i), ..., indexes[r-1](i)], or overflow_value outside x.

    Each index is an integer expression over i0..iN, xshapeK, yshapeK and @eK(...) reads of `extras`."""
    return _core.reindex(x, list(shape), list(indexes), float(overflow_value), list(overflow_conditions), list(extras))


def reindex_reduce(x, op, shape, indexes, overflow_conditions=(), extras=()):
    """Many-to-one: y[indexes(i)] = op(y[indexes(i)], x[i]) for every i in x; op in add/mul/max/min/and/or."""
    return _core.reindex_reduce(x, op, list(shape), list(indexes), list(overflow_conditions), list(extras))


def reduce(x, op, dims=None, keepdim=False):
    return _core.reduce(x, op, dims, keepdim)


def broadcast(x, shape, dims=()):
    """Jittor semantics: `dims` lists the output dims x does not have; size-1 dims of x broadcast too."""
    return _core.broadcast(x, list(shape), list(dims) if not isinstance(dims, int) else [dims])


def broadcast_to(x, shape):
    return _core.broadcast_to(x, list(shape))


def sync(*vars):
    """Computes all given Vars together (one fused plan)."""
    if len(vars) == 1 and isinstance(vars[0], (list, tuple)):
        vars = vars[0]
    if _core.trace_recording_active():
        return  # inside mj.trace the recording's end computes everything in one sync
    _core.sync_all(list(vars))


def inspect_kernels(*vars):
    """The kernels computing these Vars would launch, as plain dicts; runs nothing (see mj.inspect)."""
    return _core.plan(list(vars))


CompileError = _core.CompileError
NonFiniteError = _core.NonFiniteError  # METAJIT_CHECK_NAN found a NaN or infinity (a FloatingPointError)


from . import _var_methods  # noqa: E402,F401  (adds reshape, slicing, reductions, ... to Var)
from ._flags import flags  # noqa: E402
from ._profile import profile  # noqa: E402,F401  (public: mj.profile)
from . import jit  # noqa: E402,F401  (mj.jit.trace; mj.trace(function) is the same)
from ._memory import (memory_allocated, max_memory_allocated, memory_reserved,  # noqa: E402,F401
                      reset_peak_memory_stats, memory_summary, memory_plan_report)
from ._autograd import (grad, no_grad, enable_grad, set_grad_enabled, is_grad_enabled,  # noqa: E402
                        stop_grad)


def detach(x):
    return x.detach()


from . import ops  # noqa: E402,F401  (operator library; also adds Var methods such as x @ w, x.softmax(dim))
from .ops import *  # noqa: E402,F401,F403
__all__ += sorted(set(ops.__all__) - set(__all__))
from . import nn  # noqa: E402,F401
from . import linalg  # noqa: E402,F401  (mj.linalg: torch.linalg's solvers)
from . import optim, data, models  # noqa: E402,F401
from . import utils  # noqa: E402,F401  (mj.utils.data: PyTorch's torch.utils.data import path)
from .serialization import save, load  # noqa: E402
from ._code import code  # noqa: E402
from ._function import Function  # noqa: E402
from ._inspect import inspect  # noqa: E402
from . import cache  # noqa: E402
from ._export import export, load_exported, ArtifactError  # noqa: E402,F401  (artifacts of the C++ runtime)
cache._start_from_environment()
from . import _torch_names  # noqa: E402
from ._torch_names import *  # noqa: E402,F401,F403  (dtype constants, tensor, manual_seed, ...)
__all__ += _torch_names.__all__
from . import cuda  # noqa: E402
from . import distributed  # noqa: E402,F401  (mpirun jobs: torch.distributed's names)
CudaUnavailableError = cuda.CudaUnavailableError
cuda._start_from_environment()


def _make_unary(name):
    def function(x):
        return _core.unary(name, x if isinstance(x, Var) else array(x))
    function.__name__ = name
    function.__doc__ = f"Elementwise {name} (lazy)."
    return function


def _make_binary(name):
    def function(a, b):
        return _core.binary(name, a, b)
    function.__name__ = name
    function.__doc__ = f"Elementwise {name} with numpy broadcasting and PyTorch type promotion (lazy)."
    return function


for _name in _core.unary_op_names():  # the engine's list (meta_ops/elementwise.cc), not a copy of it
    globals()[_name] = _make_unary(_name)
    if _name not in __all__:  # relu, sigmoid and tanh are also in the operator library's list
        __all__.append(_name)
for _name in _core.binary_op_names():
    if _name == "equal":  # mj.equal is torch.equal (one bool for whole tensors); mj.eq is the elementwise op
        continue
    globals()[_name] = _make_binary(_name)
    __all__.append(_name)


def cast(x, dtype):
    return _core.cast(x, _dtype_name(dtype))


def equal(input, other):
    """True when both have the same shape and equal elements, as torch.equal (a Python bool; mj.eq is the
    elementwise comparison)."""
    if not isinstance(other, Var) or not isinstance(input, Var):
        raise TypeError("equal: expected two Vars")
    return tuple(input.shape) == tuple(other.shape) and bool((input == other).all().item())


__all__.append("equal")


from . import _torch_tensor  # noqa: E402,F401  (x.size(), x.device, x.type(), f"{x:.3f}", ...)
from . import autograd  # noqa: E402,F401
from ._device import accepting_device as _accepting_device  # noqa: E402
for _name in ("full", "zeros", "ones", "zeros_like", "ones_like", "full_like", "linspace", "arange", "rand", "randn",
              "randint", "empty", "empty_like", "eye", "as_tensor", "rand_like", "randn_like", "randperm", "normal"):
    globals()[_name] = _accepting_device(globals()[_name])
tensor = _accepting_device(_torch_names.tensor)
from ._absent import absent_name as _absent_name  # noqa: E402

# PyTorch's dtype names that are Python builtins here: mj.float is float32 (as torch.float), mj.int int32,
# mj.bool bool; defined through __getattr__ so that this package's own code keeps Python's float, int and bool.
_BUILTIN_DTYPE_NAMES = {"float": "float32", "int": "int32", "bool": "bool"}


def __getattr__(name):
    if name in _BUILTIN_DTYPE_NAMES:
        return _BUILTIN_DTYPE_NAMES[name]
    raise _absent_name(name)

from . import _var_method_table  # noqa: E402
_var_method_table.attach()  # last: some methods are top-level functions with the Var first
