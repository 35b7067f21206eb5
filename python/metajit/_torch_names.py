"""Names PyTorch scripts use for things metajit already has, so ported code runs with its imports changed:
dtype constants (mj.float32 is the dtype name "float32", which every dtype= argument takes and x.dtype
returns), tensor / as_tensor / from_numpy (copies), manual_seed, empty / empty_like (zero-filled: values are
never uninitialised here), eye, is_tensor and inference_mode. Python's bool, float and int are not shadowed:
pass dtype=bool or "bool". Also the automatic-mixed-precision names of PyTorch's AMP recipe (mj.autocast,
mj.amp.autocast, mj.amp.GradScaler): autocast runs only disabled, GradScaler scales exactly as PyTorch's."""
from . import _core, array, zeros, zeros_like, seed
from ._autograd import no_grad
from ._core import Var
from ._device import accelerator, backends, device  # noqa: F401
from ._torch_tensor import Size, tensor_types

Tensor = Var  # isinstance(x, torch.Tensor) and annotations
from .data.generator import Generator  # noqa: E402  (seeds data loading: random_split, samplers, DataLoader)
globals().update(tensor_types)  # FloatTensor, LongTensor, ...

__all__ = ["float16", "half", "float32", "float64", "double", "int8", "uint8", "int32", "int64", "long",
           "tensor", "as_tensor", "from_numpy", "manual_seed", "get_rng_state", "set_rng_state", "empty", "empty_like",
           "eye", "is_tensor",
           "inference_mode", "Tensor", "Size", "finfo", "iinfo", "get_default_dtype", "set_default_dtype",
           "set_num_threads", "get_num_threads", "set_num_interop_threads", "get_num_interop_threads",
           "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "set_float32_matmul_precision", "get_float32_matmul_precision", "compile", "is_floating_point",
           "isclose", "transpose", "device", "backends", "accelerator", "Generator", "autocast",
           "amp"] + list(tensor_types)

float16 = half = "float16"
float32 = "float32"
float64 = double = "float64"
int8 = "int8"
uint8 = "uint8"
int32 = "int32"
int64 = long = "int64"


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new Var from data (lists, numbers, numpy arrays, Vars), always a copy, as torch.tensor."""
    if isinstance(data, Var):
        data = data.numpy()
    return array(data, dtype=dtype, requires_grad=requires_grad)


def as_tensor(data, dtype=None, device=None):
    return data if isinstance(data, Var) and (dtype is None or data.dtype == dtype) else tensor(data, dtype)


def from_numpy(ndarray):
    """A Var holding a copy of `ndarray` (torch.from_numpy shares the memory; a metajit Var owns its own)."""
    return array(ndarray)


def manual_seed(value):
    seed(int(value))


def get_rng_state():
    """The random generator's state as a uint8 Var (torch.get_rng_state): set_rng_state(state) later makes the
    same random numbers come again (dropout, rand, randn, parameter initialisation)."""
    import numpy as np
    return array(np.frombuffer(_core.random_state(), np.uint8).copy())


def set_rng_state(new_state):
    """Restores a state from get_rng_state (a uint8 Var, numpy array or bytes)."""
    import numpy as np
    if isinstance(new_state, Var):
        new_state = new_state.numpy()
    if isinstance(new_state, np.ndarray):
        if new_state.dtype != np.uint8:
            raise TypeError(f"set_rng_state: expected a uint8 state from get_rng_state, got dtype {new_state.dtype}")
        new_state = new_state.tobytes()
    if not isinstance(new_state, (bytes, bytearray)):
        raise TypeError(f"set_rng_state: expected the Var get_rng_state returned, got {type(new_state).__name__}")
    _core.set_random_state(bytes(new_state))


def empty(*shape, dtype="float32", requires_grad=False):
    return zeros(*shape, dtype=dtype, requires_grad=requires_grad)


def empty_like(input, dtype=None, requires_grad=False):
    return zeros_like(input, dtype=dtype, requires_grad=requires_grad)


def eye(n, m=None, dtype="float32", requires_grad=False):
    """The n x m identity matrix (m defaults to n)."""
    import numpy as np
    return array(np.eye(n, n if m is None else m), dtype=dtype, requires_grad=requires_grad)


def is_tensor(value):
    return isinstance(value, Var)


def inference_mode(mode=True):
    """no_grad under PyTorch's newer name."""
    return no_grad() if mode else _enabled()


def _enabled():
    from ._autograd import enable_grad
    return enable_grad()


class finfo:
    """torch.finfo: bits, eps, max, min, tiny (smallest normal), resolution of a floating-point dtype."""

    def __init__(self, dtype="float32"):
        from . import _dtype_name
        import numpy as np
        self.dtype = _dtype_name(dtype)
        if not self.dtype.startswith("float"):
            raise TypeError(f"finfo: {self.dtype} is not a floating-point dtype (use iinfo)")
        info = np.finfo(self.dtype)
        self.bits, self.eps, self.max, self.min = info.bits, float(info.eps), float(info.max), float(info.min)
        self.tiny = self.smallest_normal = float(info.tiny)
        self.resolution = float(info.resolution)

    def __repr__(self):
        return f"finfo(dtype={self.dtype}, eps={self.eps}, max={self.max}, min={self.min}, tiny={self.tiny})"


class iinfo:
    """torch.iinfo: bits, max, min of an integer dtype."""

    def __init__(self, dtype):
        from . import _dtype_name
        import numpy as np
        self.dtype = _dtype_name(dtype)
        if self.dtype.startswith("float") or self.dtype == "bool":
            raise TypeError(f"iinfo: {self.dtype} is not an integer dtype (use finfo)")
        info = np.iinfo(self.dtype)
        self.bits, self.max, self.min = info.bits, int(info.max), int(info.min)

    def __repr__(self):
        return f"iinfo(dtype={self.dtype}, min={self.min}, max={self.max})"


def get_default_dtype():
    """The dtype of Python floats and of factory functions without dtype=: float32, as in PyTorch."""
    return "float32"


def set_default_dtype(dtype):
    """Only float32 is supported as the default (the factories and Python-float conversions assume it); pass
    dtype= explicitly, or convert a model with model.double()."""
    from . import _dtype_name
    if _dtype_name(dtype) != "float32":
        raise NotImplementedError(f"set_default_dtype({_dtype_name(dtype)}): metajit's default dtype is float32 "
                                  "only; pass dtype= to factories or use model.double()")


def set_num_threads(count):
    """The threads metajit's kernels and oneDNN calls use (mj.flags.num_threads)."""
    from ._flags import flags
    flags.num_threads = int(count)


def get_num_threads():
    from ._flags import flags
    return flags.num_threads


def set_num_interop_threads(count):
    """Accepted for compatibility: metajit runs one graph at a time, so there is no inter-op pool to size."""
    if int(count) < 1:
        raise ValueError(f"set_num_interop_threads: {count} is not a positive thread count")


def get_num_interop_threads():
    return 1


_deterministic = {"enabled": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Recorded for are_deterministic_algorithms_enabled(): metajit's kernels and library calls give the same
    bits from run to run on the same machine and thread count already (no atomics in reductions)."""
    _deterministic.update(enabled=bool(mode), warn_only=bool(warn_only))


def are_deterministic_algorithms_enabled():
    return _deterministic["enabled"]


_matmul_precision = ["highest"]


def set_float32_matmul_precision(precision):
    """'highest', 'high' or 'medium' (PyTorch's names). Recorded only: metajit's float32 matrix products are
    computed in float32 on every setting."""
    if precision not in ("highest", "high", "medium"):
        raise ValueError(f"set_float32_matmul_precision: {precision!r} is not 'highest', 'high' or 'medium'")
    _matmul_precision[0] = precision


def get_float32_matmul_precision():
    return _matmul_precision[0]


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """torch.compile: returns `model` (a Module or function) unchanged, since metajit already records every
    call lazily and compiles the fused kernels itself. Usable as @mj.compile and @mj.compile(mode=...)."""
    if model is None:
        return lambda function: function
    if not callable(model):
        raise TypeError(f"compile: expected a Module or a function, got {type(model).__name__}")
    return model


def is_floating_point(input):
    return input.dtype.startswith("float")


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |input - other| <= atol + rtol * |other| (a bool Var); NaNs equal only with equal_nan."""
    from ._core import Var as _Var
    if not isinstance(input, _Var):
        input = tensor(input)
    difference = (input - other).abs()
    result = difference <= atol + rtol * (other.abs() if isinstance(other, _Var) else abs(other))
    result = result | (input == other)  # equal infinities: their difference is NaN
    if equal_nan:
        result = result | (input.isnan() & (other.isnan() if isinstance(other, _Var) else other != other))
    return result


def transpose(input, dim0, dim1):
    return input.transpose(dim0, dim1)


from . import amp  # noqa: E402  (torch.amp: autocast, disabled only, and GradScaler)
from .amp import autocast  # noqa: E402,F401

