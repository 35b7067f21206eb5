"""Memory accounting with PyTorch's names: how many bytes live values hold on the host and on the GPU, the most
they have held since the last reset, and what the allocators keep cached for reuse.

    mj.memory_allocated()            # host bytes held by live values ("cpu"; "cuda" for the GPU)
    mj.max_memory_allocated("cuda")  # the peak since mj.reset_peak_memory_stats()
    print(mj.memory_summary())       # one table for both devices

Figures come from metajit's own allocators (rounded to their size classes), not from the operating system:
memory other libraries or Python objects hold is not counted. This module only reads counters."""
from . import _core

_DEVICES = ("cpu", "cuda")
_COUNTERS = {  # device: (allocated, peak, cached)
    "cpu": ("bytes_allocated", "bytes_allocated_peak", "bytes_cached"),
    "cuda": ("device_bytes_allocated", "device_bytes_allocated_peak", "device_bytes_cached"),
}


def _device_name(device):
    name = "cpu" if device is None else str(getattr(device, "type", device)).split(":")[0]
    if name not in _DEVICES:
        raise ValueError(f"memory statistics: device must be 'cpu' or 'cuda', got {device!r}")
    return name


def _counter(device, which):
    return int(_core.stats()[_COUNTERS[_device_name(device)][which]])


def memory_allocated(device=None):
    """Bytes held by live values on `device` ('cpu' by default, or 'cuda'; the CUDA emulator counts as 'cuda')."""
    return _counter(device, 0)


def max_memory_allocated(device=None):
    """The most bytes live values held on `device` since the process started or reset_peak_memory_stats()."""
    return _counter(device, 1)


def memory_reserved(device=None):
    """Bytes held by live values plus those the allocator keeps cached for reuse on `device`."""
    return _counter(device, 0) + _counter(device, 2)


def reset_peak_memory_stats(device=None):
    """Starts the peaks of both devices again from what is allocated now (with mj.reset_stats's other counters)."""
    _device_name(device)
    _core.reset_stats()


def _mebibytes(count):
    return f"{count / 2**20:10.2f} MiB"


def memory_summary(device=None, abbreviated=False):
    """A table of allocated, peak and cached bytes per device, and the number of live graph nodes."""
    statistics = _core.stats()
    devices = _DEVICES if device is None else (_device_name(device),)
    lines = [f"{'metajit memory':<18}{'allocated':>14}{'peak':>14}{'cached':>14}{'reserved':>14}"]
    for name in devices:
        allocated, peak, cached = (int(statistics[key]) for key in _COUNTERS[name])
        lines.append(f"{name:<18}{_mebibytes(allocated):>14}{_mebibytes(peak):>14}{_mebibytes(cached):>14}"
                     f"{_mebibytes(allocated + cached):>14}")
    if not abbreviated:
        lines.append(f"live graph nodes: {int(statistics['vars_live'])}; peaks since the last "
                     "mj.reset_peak_memory_stats() or mj.reset_stats(); mj.gc() returns cached memory")
    return "\n".join(lines)


def memory_plan_report():
    """What the last backward() under mj.flags.memory_budget decided, in bytes as its model counts them: the
    budget, what was allocated when backward was recorded (held), the modelled peak without recomputation
    (unconstrained_peak) and with it (planned_peak), the forward values backward reads without recomputation
    (saved) and those it keeps (kept), how many nodes it recomputes (recomputed_nodes, of which
    recomputed_contractions are reductions: matrix products, convolutions, sums), the stage it needed ('none',
    'elementwise' or 'segments') and whether the model fits the budget (fits). See docs/memory.md."""
    return dict(_core.last_recomputation_report())
