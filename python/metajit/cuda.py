"""metajit.cuda: what the CUDA backend finds on this machine, and the target its kernels are compiled for.

Where kernels run is one process-wide choice: ``mj.flags.use_cuda = True`` (or ``METAJIT_DEVICE=cuda``) runs
every kernel on the GPU. A Var's value moves to whichever side reads it, once: ``x.numpy()`` copies a GPU value
to the host, a GPU kernel reading a value made on the host (``mj.array``) copies it to the GPU. ``x.cuda()`` and
``x.cpu()`` make that copy now and return ``x``.

The CUDA kernels of any graph can be shown and compiled without a GPU (``mj.inspect(y, device="cuda")`` and
``kernel.compile()``): only NVRTC is needed, which ``pip install nvidia-cuda-nvrtc`` provides. See docs/cuda.md.
"""
import glob
import importlib.util
import os
import warnings

from . import _core, _memory

CudaUnavailableError = _core.CudaUnavailableError

# The architecture compiled for when there is no GPU to ask: the H100's (sm_90). METAJIT_CUDA_ARCH overrides it.
DEFAULT_ARCHITECTURE = 90


def _add_wheel_search_directories():
    """Lets the core find NVRTC (nvidia-cuda-nvrtc: nvidia/cu13/lib), cuBLAS and cuDNN (nvidia-cublas,
    nvidia-cudnn-cu13: nvidia/*/lib) in the NVIDIA wheels, wherever pip put them."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return
    for root in (spec.submodule_search_locations or []) if spec else []:
        directory = os.path.join(root, "cu13", "lib")
        if os.path.exists(os.path.join(directory, "libnvrtc.so.13")):
            _core.add_nvrtc_search_directory(directory)
        if os.path.exists(os.path.join(root, "nccl", "lib", "libnccl.so.2")):  # nvidia-nccl-cu13
            _core.add_nccl_search_directory(os.path.join(root, "nccl", "lib"))
        for library in ("libcublas.so.13", "libcudnn.so.9"):
            for found in sorted(glob.glob(os.path.join(root, "*", "lib", library))):
                _core.add_cuda_library_search_directory(os.path.dirname(found))


_add_wheel_search_directories()


def status():
    """A dict: the driver's state (``driver_reason`` is "" when usable, ``devices``), and NVRTC's
    (``nvrtc_reason`` "" when loaded, ``nvrtc_version``, ``nvrtc_path``, ``nvrtc_architectures``)."""
    return dict(_core.cuda_status())


def is_available():
    """True when a GPU and its driver are present, so ``mj.flags.use_cuda = True`` runs kernels on it."""
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
        arch = _core.flag_value("METAJIT_CUDA_ARCH") or None
    if arch is None:
        devices = status()["devices"]
        return devices[0]["architecture"] if devices else DEFAULT_ARCHITECTURE
    try:
        return _core.parse_cuda_architecture(str(arch))
    except ValueError as error:
        raise ValueError(f"CUDA architecture: {error}") from None


def require_gpu(what):
    """Raises CudaUnavailableError, naming what is missing, unless a GPU can run kernels (or the emulator runs
    them, for x.cuda() in tests)."""
    if _core.cuda_execution() == "emulator":
        return
    reason = unavailable_reason()
    if reason:
        raise CudaUnavailableError(f"{what}: CUDA is not available: {reason}")


def _set_execution(mode):
    try:
        _core.set_cuda_execution(mode)
    except ValueError as error:
        raise RuntimeError(f"mj.flags.use_cuda: {error}") from None


def synchronize():
    """Waits until every kernel and copy queued on the GPU has finished (kernels run asynchronously; reading a
    value, x.numpy(), waits by itself). Use it around timings."""
    _core.cuda_synchronize()


def precompile(*vars, arch=None):
    """Compiles every CUDA kernel that computing `vars` would launch, for `arch` (default: as
    target_architecture()), several at once on the thread pool, into the kernel cache; runs nothing and needs
    NVRTC but no GPU. A training step otherwise compiles its kernels one by one as they first launch. Returns
    how many kernels were compiled (the rest were cached already). Compile errors are reported when the kernel
    launches, or by mj.inspect(..., device="cuda")[i].compile()."""
    from . import Var
    if len(vars) == 1 and isinstance(vars[0], (list, tuple)):
        vars = tuple(vars[0])
    for value in vars:
        if not isinstance(value, Var):
            raise TypeError(f"precompile: expected metajit Vars, got {type(value).__name__}")
    return _core.precompile_cuda(list(vars), target_architecture(arch))


def compile_source(source, arch=None):
    """Compiles CUDA C++ `source` with NVRTC and the flags metajit's generated kernels get, for `arch` (default:
    as target_architecture()); returns the CUBIN (PTX for an architecture NVRTC does not know) as bytes. Needs NVRTC
    but no GPU; a compile error raises metajit.CompileError with NVRTC's log."""
    return _core.nvrtc_compile(source, target_architecture(arch))


def _start_from_environment():
    """METAJIT_DEVICE=cuda runs kernels on the GPU; on a machine that cannot, say why once and stay on the CPU.
    METAJIT_DEVICE=cuda-emulator runs them in the CPU emulator of CUDA kernels (tests)."""
    device = _core.flag_value("METAJIT_DEVICE")  # 'cpu', 'cuda' or 'cuda-emulator'; another value raises ValueError
    if device == "cpu":
        return
    if device == "cuda-emulator":
        _set_execution("emulator")
        return
    reason = unavailable_reason()
    if reason:
        warnings.warn(f"METAJIT_DEVICE=cuda: {reason}; running on the CPU", RuntimeWarning, stacklevel=2)
        return
    _set_execution("gpu")


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


# PyTorch's torch.cuda names that training programs call. metajit has one GPU context (the first device), and
# its random numbers come from one generator shared with the CPU (mj.manual_seed), so the seeding calls seed it.
def manual_seed(seed):
    """Seeds metajit's one random generator (the same one mj.manual_seed seeds), as torch.cuda.manual_seed."""
    _core.seed(int(seed))


manual_seed_all = manual_seed


def current_device():
    """The index of the GPU kernels run on: always 0 (metajit uses the first GPU)."""
    require_gpu("mj.cuda.current_device()")
    return 0


def set_device(device):
    """Accepts the first GPU only (metajit drives one GPU per process; several GPUs are several processes)."""
    from ._device import device as device_type
    index = device if isinstance(device, int) else device_type(device).index or 0
    if index != 0:
        raise ValueError(f"mj.cuda.set_device({device!r}): metajit uses the first GPU of each process; "
                         "select another with CUDA_VISIBLE_DEVICES")


def get_device_name(device=None):
    require_gpu("mj.cuda.get_device_name()")
    return status()["devices"][0]["name"]


def is_initialized():
    return _core.cuda_execution() == "gpu"


def empty_cache():
    """Returns the GPU memory cached by metajit's allocator (and the host's) to the system."""
    _core.gc()


def memory_allocated(device=None):
    """Bytes of GPU memory held by live values."""
    return _memory.memory_allocated("cuda")


def max_memory_allocated(device=None):
    """The most GPU bytes live values held since the start or reset_peak_memory_stats()."""
    return _memory.max_memory_allocated("cuda")


def memory_reserved(device=None):
    """Bytes of GPU memory held by live values and the allocator's cache."""
    return _memory.memory_reserved("cuda")


def reset_peak_memory_stats(device=None):
    """Starts the peaks again from what is allocated now (see mj.reset_peak_memory_stats)."""
    _memory.reset_peak_memory_stats("cuda")


def memory_summary(device=None, abbreviated=False):
    """The GPU row of mj.memory_summary()."""
    return _memory.memory_summary("cuda", abbreviated)


def __getattr__(name):
    """torch.cuda.amp (the older spelling of torch.amp) is mj.amp; other missing names say what they are."""
    if name == "amp":
        from . import amp
        return amp
    from ._absent import absent_name
    raise absent_name(name, "metajit.cuda", "torch.cuda")
