"""mj.inspect: the kernels computing some Vars would launch, without running anything."""
from . import _core


class CompiledKernel:
    """A kernel's compiled binary: ``binary`` (bytes; also ``bytes(compiled)``), ``format`` ("elf" for a CPU
    object, "cubin" or "ptx" for CUDA), ``architecture`` (CUDA only, e.g. "sm_90") and ``origin``: where it
    came from ("compiled", "memory", "bundle" or "disk")."""

    def __init__(self, binary, format, architecture=None, origin=None):
        self.binary = binary
        self.format = format
        self.architecture = architecture
        self.origin = origin

    def __bytes__(self):
        return self.binary

    def __len__(self):
        return len(self.binary)

    def __repr__(self):
        target = f" for {self.architecture}" if self.architecture else ""
        return f"<metajit compiled kernel: {len(self.binary)} bytes of {self.format}{target}, {self.origin}>"


class Kernel:
    """One kernel of a plan. ``print(kernel)`` shows its header and readable source (without the shared
    prelude; ``kernel.full_source`` is exactly what is compiled)."""

    def __init__(self, entry, device="cpu", architecture=None):
        self.device = device                 # "cpu" or "cuda"
        self.architecture = architecture     # CUDA: the target, e.g. "sm_90"
        self.kind = entry["kind"]            # "generated", "code", "library" or "library+epilogue"
        self.key = entry["key"] or None      # cache key (None for a library call alone)
        self.ops = list(entry["ops"])        # fused ops, each "op  [shape]  file.py:line"
        self.library = entry["library"]      # e.g. "onednn convolution forward (jit:avx512_core)"
        self.contraction = entry["contraction"]
        # Library calls: each operand the planner stored first so that the call can read it, and why, e.g.
        # "operand 1 (reindex [8, 32, 34, 34] of [8, 32, 32, 32] at model.py:12) stored first: the library cannot
        # read a reindex whose indices are not affine (...); storing 1.1 MiB costs less than a generated loop nest
        # of 3.0e+08 multiply-adds". The stored values are kernels of their own, earlier in the plan.
        self.stored_operands = list(entry.get("stored_operands", []))
        self.header = entry["header"]
        self.full_source = entry["body"]
        self.where = entry["cached"]         # "memory", "bundle", "disk", "library" or "" (would compile)
        # Per buffer (outputs, then inputs, in the kernel's parameter order), the elements its launch adds to the
        # buffer's start: x[t] is compiled as x[0], so slices at any offset share the kernel (empty: none).
        self.buffer_offsets = list(entry.get("buffer_offsets", []))
        # The kernel IR as text (jit/ir/ir_text.h), as both renderers read it after the shared IR passes; None for
        # a library call alone, a Code op, and CUDA kernels.
        self.ir = entry.get("ir")
        self.schedule = entry.get("schedule")  # CUDA: "thread per element", "block per row", ...
        # CUDA: (entry function, work items, one block per item?, blocks that cover the work once) per launch
        self.launches = list(entry.get("launches", []))
        self._compile_cuda = entry.get("compile")

    def compile(self):
        """Compiles the kernel (or takes it from the cache) and returns a CompiledKernel: the CPU object file,
        or the CUBIN (PTX for a GPU newer than NVRTC knows). CUDA needs NVRTC but no GPU."""
        if self.device == "cuda":
            result = self._compile_cuda()
            return CompiledKernel(result["binary"], result["format"], result["architecture"], result["origin"])
        if not self.key:
            raise ValueError(f"this kernel is a library call ({self.library}); there is no generated code to compile")
        where = _core.locate_kernel(self.key)
        binary = _core.compile_cpu_kernel(self.key, self.full_source, self.header)
        return CompiledKernel(binary, "elf", None, where or "compiled")

    @property
    def cached(self):
        """True when running it would not compile anything."""
        return self.where != ""

    @property
    def lines(self):
        """The user lines (file.py:line) that created the fused ops."""
        found = []
        for op in self.ops:
            line = op.split()[-1] if op.split() else ""
            if line and line not in found:
                found.append(line)
        return found

    @property
    def source(self):
        """The kernel without the prelude every kernel shares."""
        text = self.full_source
        if self.kind == "code":
            marker = "}  // namespace mj\n"
            cut = text.find(marker)
            cut = cut + len(marker) - 1 if cut >= 0 else -1
        else:
            marker = "// ---- end of prelude ----\n"
            cut = text.find(marker)
            cut = cut + len(marker) - 1 if cut >= 0 else -1
        if cut < 0:
            return text
        return (f"// ... shared prelude ({text[:cut].count(chr(10)) + 1} lines) omitted; kernel.full_source has "
                f"it ...\n" + text[cut + 1:])

    def __repr__(self):
        what = self.library if self.kind.startswith("library") else self.kind
        if self.device == "cuda":
            what = f"cuda {self.architecture} {what}, {self.schedule}"
        where = "cached in " + self.where if self.where else "not compiled yet"
        return f"<metajit kernel {self.key or '-'} {what}: {len(self.ops)} ops, {where}>"

    def __str__(self):
        parts = [f"// key: {self.key or '(library call)'}  cached: {self.where or 'no'}"]
        if self.library:
            parts.append(f"// library call: {self.library}")
            parts += [f"// {store}" for store in self.stored_operands]
        if self.full_source:
            parts.append(self.header.rstrip("\n"))
            parts.append(self.source.rstrip("\n"))
        return "\n".join(parts) + "\n"


def inspect(*vars, device=None, arch=None):
    """The kernels that computing `vars` would launch, in launch order; runs and compiles nothing.

    device="cuda" gives the CUDA kernels instead (no GPU needed), rendered for `arch` (default: the GPU's, else
    METAJIT_CUDA_ARCH, else sm_90); ``kernel.compile()`` then needs NVRTC. Without `device`, the kernels of
    where kernels run now: CUDA while mj.flags.use_cuda is set."""
    if len(vars) == 1 and isinstance(vars[0], (list, tuple)):
        vars = tuple(vars[0])
    if device is None and _core.cuda_execution() != "off":
        device = "cuda"
    if device in (None, "cpu"):
        if arch is not None:
            raise ValueError("inspect: arch= is for device='cuda'")
        return [Kernel(entry) for entry in _core.plan(list(vars))]
    if device != "cuda":
        raise ValueError(f"inspect: device={device!r} is not a device; use 'cpu' or 'cuda'")
    from . import cuda
    architecture = cuda.target_architecture(arch)
    return [Kernel(entry, "cuda", f"sm_{architecture}") for entry in _core.plan_cuda(list(vars), architecture)]
