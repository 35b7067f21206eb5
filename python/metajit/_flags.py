"""metajit.flags: runtime settings mirroring the METAJIT_* environment variables (see docs/configuration.md).

Every setting is declared once, in the C++ registry (core/flag_table.cc); `flags.table()` lists them with their
values now. The attributes below change the settings that can change at run time; their owners keep the values.
"""
from . import _core


class _Flags:
    @property
    def num_threads(self):
        return _core.thread_count()

    @num_threads.setter
    def num_threads(self, count):
        _core.set_thread_count(int(count))

    @property
    def cache_dir(self):
        return _core.cache_dir()

    @cache_dir.setter
    def cache_dir(self, directory):
        _core.set_cache_dir(str(directory))

    @property
    def lowering(self):
        """Whether matrix products and convolutions run in oneDNN (METAJIT_LOWERING=0 turns it off)."""
        return _core.library_lowering()

    @lowering.setter
    def lowering(self, enabled):
        _core.set_library_lowering(bool(enabled))

    @property
    def multiple_outputs(self):
        """Whether elementwise values of one shape computed from the same inputs (or small ones) share a kernel
        that stores each of them (METAJIT_MULTIPLE_OUTPUTS=0 turns it off: one kernel per stored value).
        Results are the same either way. See docs/design.md, "Kernels with several outputs"."""
        return _core.multiple_outputs()

    @multiple_outputs.setter
    def multiple_outputs(self, enabled):
        _core.set_multiple_outputs(bool(enabled))

    @property
    def conv_algorithm(self):
        """How lowered convolutions compute (METAJIT_CONV_ALGORITHM): 'auto' (default) takes Winograd F(4x4, 3x3)
        for 3x3 stride-1 convolutions with at least 32 channels and 128 output tiles, where it measured about 2x
        faster, unless its scratchpad would pass 8x the call's tensors; 'direct' never uses it (the smallest
        rounding error); 'winograd' uses it wherever oneDNN has it. See docs/lowering.md."""
        return _core.conv_algorithm()

    @conv_algorithm.setter
    def conv_algorithm(self, name):
        _core.set_conv_algorithm(str(name))

    @property
    def device_memory_limit(self):
        """Bytes of GPU (or CUDA-emulator) memory metajit may hold; 0 (the default) means all the device has
        (METAJIT_DEVICE_MEMORY_LIMIT). Past it, and whenever the device is full, the values used least recently
        move to host memory and come back before their next use, so a model whose working set exceeds the device
        still trains, to the same numbers; mj.stats()["device_evictions"] counts the moves. Only values that the
        kernel being launched uses stay: if those alone exceed the limit, the MemoryError names the op and line."""
        return _core.device_memory_limit()

    @device_memory_limit.setter
    def device_memory_limit(self, limit):
        _core.set_device_memory_limit(int(limit))

    @property
    def memory_budget(self):
        """The most memory a training step may take at its peak (METAJIT_MEMORY_BUDGET): 0 (the default) is off;
        a number of 1 or more is bytes; a fraction between 0 and 1 is that share of the step's peak as the policy
        models it without recomputation. Under a budget, backward recomputes forward values instead of keeping
        them: elementwise values from the reductions they came from first, then whole segments between kept
        matrix products and convolutions (Chen et al.'s sqrt(N) checkpoints). Gradients are unchanged; what it
        bounds and costs is in docs/memory.md, and mj.memory_plan_report() says what the last backward chose."""
        return _core.memory_budget()

    @memory_budget.setter
    def memory_budget(self, budget):
        _core.set_memory_budget(float(budget))

    @property
    def check_nan(self):
        """Whether every computed value is scanned for NaN/inf (METAJIT_CHECK_NAN=1); a hit raises
        mj.NonFiniteError naming the op and the user line that created it."""
        return _core.check_nan()

    @check_nan.setter
    def check_nan(self, enabled):
        _core.set_check_nan(bool(enabled))

    @property
    def use_cuda(self):
        """Whether kernels run as CUDA kernels: True on the GPU, "emulator" in the CPU emulator of CUDA
        kernels (tests and debugging), False on the CPU. Setting True without a usable GPU raises
        mj.CudaUnavailableError naming what is missing (driver, device). See docs/cuda.md."""
        mode = _core.cuda_execution()
        return {"gpu": True, "emulator": "emulator"}.get(mode, False)

    @use_cuda.setter
    def use_cuda(self, enabled):
        from . import cuda
        if isinstance(enabled, str):
            if enabled != "emulator":
                raise ValueError(f"mj.flags.use_cuda takes True, False or 'emulator', not {enabled!r}")
            cuda._set_execution("emulator")
        elif enabled:
            cuda.require_gpu("mj.flags.use_cuda = True")
            cuda._set_execution("gpu")
        else:
            cuda._set_execution("off")

    @property
    def log(self):
        return self._log

    @log.setter
    def log(self, level):
        # The ladder of core/log.h, as the registry lists METAJIT_LOG's choices.
        levels = next(row["choices"] for row in _core.flag_table() if row["name"] == "METAJIT_LOG")
        if level not in levels:
            raise ValueError(f"log level must be one of {', '.join(map(repr, levels))}, got {level!r}")
        self._log = level
        _core.set_log_level(level)

    def __init__(self):
        self._log = _core.flag_value("METAJIT_LOG")  # the level the C++ side read at load

    def table(self):
        """Every METAJIT_* setting (core/flag_table.cc) as a dict: name, type, default, choices, documentation,
        python_setting (the attribute or function that changes it at run time), reader ('engine', or 'python' for
        those the Python package acts on), environment (the variable's text or None) and value (the value in use:
        the attribute's for settings mirrored here, else the environment's, parsed; a bad value's error text)."""
        rows = _core.flag_table()
        for row in rows:
            attribute = row["python_setting"]
            if attribute.isidentifier() and isinstance(getattr(type(self), attribute, None), property):
                row["value"] = getattr(self, attribute)
            else:
                try:
                    row["value"] = _core.flag_value(row["name"])
                except ValueError as error:
                    row["value"] = f"error: {error}"
        return rows

    def __repr__(self):
        return (f"metajit.flags(num_threads={self.num_threads}, cache_dir={self.cache_dir!r}, log={self.log!r}, "
                f"lowering={self.lowering}, multiple_outputs={self.multiple_outputs}, "
                f"conv_algorithm={self.conv_algorithm!r}, check_nan={self.check_nan})")


flags = _Flags()
