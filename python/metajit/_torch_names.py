"""Names PyTorch scripts use for things metajit already has, so ported code runs with its imports changed:
dtype constants (mj.float32 is the dtype name "float32", which every dtype= argument takes and x.dtype
returns), tensor / as_tensor / from_numpy (copies), manual_seed, empty / empty_like (zero-filled: values are
never uninitialised here), eye, is_tensor and inference_mode. Python's bool, float and int are not shadowed:
pass dtype=bool or "bool"."""
from . import array, zeros, zeros_like, seed
from ._autograd import no_grad
from ._core import Var

__all__ = ["float16", "half", "float32", "float64", "double", "int8", "uint8", "int32", "int64", "long",
           "tensor", "as_tensor", "from_numpy", "manual_seed", "empty", "empty_like", "eye", "is_tensor",
           "inference_mode"]

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
