"""PyTorch's device vocabulary: mj.device, x.device, the device= argument of factory functions, mj.backends and
mj.accelerator, so ported code that names devices runs unchanged.

metajit does not place each tensor by hand: where kernels run is one switch (mj.flags.use_cuda, docs/cuda.md),
and values move between host and GPU by themselves when a kernel needs them. So a device here is a name that
is checked (an unknown or absent device is an error that says so) and reported, never a second placement
mechanism. This file must not move data; x.to(device) and Module.to(device) keep calling cpu()/cuda().
"""
import functools

_DEVICE_TYPES = ("cpu", "cuda")


class device:
    """torch.device: device("cpu"), device("cuda"), device("cuda:0"), device("cuda", 0). Compares equal to
    another device or to its string form ("cuda:0" == device("cuda", 0))."""
    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, int) and index is None:  # torch.device(0) is the first GPU
            type, index = "cuda", type
        elif not isinstance(type, str):
            raise TypeError(f"device: expected a string such as 'cpu' or 'cuda:0', got {type!r}")
        else:
            text = type.strip()
            if ":" in text:
                text, _, number = text.partition(":")
                if index is not None:
                    raise ValueError(f"device: {type!r} already names an index; do not pass index={index}")
                if not number.isdigit():
                    raise ValueError(f"device: {type!r} has no device index after ':'")
                index = int(number)
            type = text
        if type not in _DEVICE_TYPES:
            raise ValueError(f"device: {type!r} is not a metajit device; metajit runs on 'cpu' and 'cuda' "
                             "(mj.flags.use_cuda chooses where kernels run)")
        if index is not None:
            index = int(index)
            if index < 0:
                raise ValueError(f"device: index {index} is negative")
            if type == "cpu" and index != 0:
                raise ValueError(f"device: 'cpu:{index}' does not exist; there is one CPU device")
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "index", index)

    def __setattr__(self, name, value):
        raise AttributeError("a device is immutable")

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type={self.type!r})" if self.index is None else \
            f"device(type={self.type!r}, index={self.index})"

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (ValueError, TypeError):
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __reduce__(self):
        return device, (self.type, self.index)


def checked(value, what):
    """`value` (None, a string, a number or a device) as a device, or None; raises naming `what` when it names
    no usable device. A CUDA device without a GPU is an error here, at the user's call, not a late surprise."""
    if value is None:
        return None
    try:
        result = device(value)
    except (ValueError, TypeError) as error:
        raise type(error)(f"{what}: {error}") from None
    if result.type == "cuda":
        from . import cuda
        cuda.require_gpu(f"{what}(device={str(result)!r})")
        count = cuda.device_count()  # 0 under the emulator, which stands in for one GPU
        if result.index is not None and count and result.index >= count:
            raise ValueError(f"{what}: {result} does not exist ({count} GPU(s) found)")
    return result


def accepting_device(function):
    """Adds PyTorch's placement arguments to a factory function: device= (checked, see `checked`), and
    layout=, pin_memory=, memory_format= (only their defaults exist here: dense, pageable, contiguous)."""

    @functools.wraps(function)
    def factory(*args, device=None, layout=None, pin_memory=False, memory_format=None, **kwargs):
        checked(device, function.__name__)
        if layout is not None and str(layout) not in ("strided", "torch.strided"):
            raise ValueError(f"{function.__name__}: layout={layout!r} is not supported; metajit tensors are dense")
        if memory_format is not None and str(memory_format) not in ("contiguous_format", "preserve_format"):
            raise ValueError(f"{function.__name__}: memory_format={memory_format!r} is not supported")
        return function(*args, **kwargs)
    return factory


def device_of(var):
    """x.device: the GPU when it holds the value, or will compute it (mj.flags.use_cuda and not yet computed);
    else the CPU."""
    from . import _core
    from ._flags import flags
    if _core.value_on_device(var) or (flags.use_cuda and not var.is_computed):
        return device("cuda", 0)
    return device("cpu")


class _Flag:
    """A settable flag object (mj.backends.cudnn.benchmark = True): PyTorch programs set these; metajit's
    choices do not depend on them, so they are remembered and reported, nothing more."""

    def __init__(self, **values):
        self.__dict__.update(values)

    def __repr__(self):
        return "flags(" + ", ".join(f"{name}={value!r}" for name, value in vars(self).items()
                                    if not callable(value)) + ")"


def _cudnn_available():
    from . import cuda
    return cuda.is_available()


class _Backends:
    """mj.backends: cudnn (benchmark, deterministic, enabled, allow_tf32, is_available()), cuda.matmul,
    mps (never available), mkldnn/openmp (is_available())."""

    def __init__(self):
        self.cudnn = _Flag(benchmark=False, deterministic=False, enabled=True, allow_tf32=True,
                           is_available=_cudnn_available, version=lambda: None)
        # TF32 switches are remembered only: metajit's cuBLAS and cuDNN calls compute in float32 (docs/cuda.md).
        self.cuda = _Flag(matmul=_Flag(allow_tf32=False, allow_fp16_reduced_precision_reduction=True),
                          is_built=lambda: True)
        self.mps = _Flag(is_available=lambda: False, is_built=lambda: False)
        self.mkldnn = _Flag(is_available=lambda: True, enabled=True)  # oneDNN runs the CPU's contractions
        self.openmp = _Flag(is_available=lambda: False)


backends = _Backends()


class _Accelerator:
    """mj.accelerator (PyTorch 2.6's device-neutral names): the GPU when one is usable, else none."""

    @staticmethod
    def is_available():
        from . import cuda
        return cuda.is_available()

    @staticmethod
    def current_accelerator(check_available=False):
        return device("cuda", 0) if _Accelerator.is_available() else None

    @staticmethod
    def device_count():
        from . import cuda
        return cuda.device_count()

    @staticmethod
    def synchronize(device=None):
        from . import cuda
        if cuda.is_available():
            cuda.synchronize()


accelerator = _Accelerator()
