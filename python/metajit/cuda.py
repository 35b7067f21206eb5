"""metajit.cuda: what the CUDA backend finds on this machine, and the target its kernels are compiled for.

The CUDA kernels of any graph can be shown and compiled without a GPU (``mj.inspect(y, device="cuda")`` and
``kernel.compile()``): only NVRTC is needed, which ``pip install nvidia-cuda-nvrtc`` provides. Running them
needs the NVIDIA driver and a GPU; see docs/cuda.md for what is built so far.
"""
import importlib.util
import os
import warnings

from . import _core

CudaUnavailableError = _core.CudaUnavailableError

# The architecture compiled for when there is no GPU to ask: the H100's (sm_90). METAJIT_CUDA_ARCH overrides it.
DEFAULT_ARCHITECTURE = 90


def _add_wheel_search_directories():
    """Lets the core find NVRTC from the nvidia-cuda-nvrtc wheel (nvidia/cu13/lib), wherever pip put it."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return
    for root in (spec.submodule_search_locations or []) if spec else []:
        directory = os.path.join(root, "cu13", "lib")
        if os.path.exists(os.path.join(directory, "libnvrtc.so.13")):
            _core.add_nvrtc_search_directory(directory)


_add_wheel_search_directories()


def status():
    """A dict: the driver's state (``driver_reason`` is "" when usable, ``devices``), and NVRTC's
    (``nvrtc_reason`` "" when loaded, ``nvrtc_version``, ``nvrtc_path``, ``nvrtc_architectures``)."""
    return dict(_core.cuda_status())


def is_available():
    """True when a GPU and its driver are present (running kernels on it is not built yet; see docs/cuda.md)."""
    return status()["driver_reason"] == ""


def unavailable_reason():
    """Why the GPU cannot be used ("" when it can): the missing library, or the driver's own error."""
    return status()["driver_reason"]


def nvrtc_available():
    """True when NVRTC can be loaded, so CUDA kernels can be compiled (no GPU needed)."""
    return status()["nvrtc_reason"] == ""


def device_count():
    return len(status()["devices"])


def target_architecture(arch=None):
    """The architecture CUDA kernels are compiled for, as a number (90 for sm_90): `arch` when given
    ("sm_90", "90", "9.0" or 90), else METAJIT_CUDA_ARCH, else the first GPU's, else sm_90."""
    if arch is None:
        arch = os.environ.get("METAJIT_CUDA_ARCH") or None
    if arch is None:
        devices = status()["devices"]
        return devices[0]["architecture"] if devices else DEFAULT_ARCHITECTURE
    try:
        return _core.parse_cuda_architecture(str(arch))
    except ValueError as error:
        raise ValueError(f"CUDA architecture: {error}") from None


def require_gpu(what):
    """Raises for a request to run on the GPU: CudaUnavailableError naming what is missing, or, on a machine
    with a GPU, NotImplementedError (this build compiles CUDA kernels but does not run them yet)."""
    reason = unavailable_reason()
    if reason:
        raise CudaUnavailableError(f"{what}: CUDA is not available: {reason}")
    raise NotImplementedError(f"{what}: running on the GPU is not built yet; mj.inspect(..., device='cuda') shows "
                              f"and compiles the CUDA kernels (see docs/cuda.md)")


def _start_from_environment():
    """METAJIT_DEVICE=cuda on a machine that cannot run CUDA: say why once, and stay on the CPU."""
    device = os.environ.get("METAJIT_DEVICE", "").strip().lower()
    if device in ("", "cpu"):
        return
    if device != "cuda":
        raise ValueError(f"METAJIT_DEVICE={device!r} is not a device; use 'cpu' or 'cuda'")
    reason = unavailable_reason() or "running on the GPU is not built yet (see docs/cuda.md)"
    warnings.warn(f"METAJIT_DEVICE=cuda: {reason}; running on the CPU", RuntimeWarning, stacklevel=2)


def emulate(*vars, max_blocks=4):
    """Computes `vars` by running their CUDA kernels on the CPU in an emulator (each block's threads as fibers):
    checks CUDA kernels' numbers, a Code op's cuda_src included, on a machine without a GPU. Slow; for tests and
    debugging. Inputs that are not yet computed are computed by their CUDA kernels too. Returns numpy arrays.
    `max_blocks` caps each launch's grid so the kernels' grid-stride loops run more than once."""
    import numpy as np
    from . import Var
    if len(vars) == 1 and isinstance(vars[0], (list, tuple)):
        vars = tuple(vars[0])
    for value in vars:
        if not isinstance(value, Var):
            raise TypeError(f"emulate: expected metajit Vars, got {type(value).__name__}")
    results = []
    for data, dtype, shape in _core.emulate_cuda(list(vars), int(max_blocks)):
        results.append(np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape).copy())
    return results
