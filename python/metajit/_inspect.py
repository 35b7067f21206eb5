"""mj.inspect: the kernels computing some Vars would launch, without running anything."""
from . import _core


class Kernel:
    """One kernel of a plan. ``print(kernel)`` shows its header and readable source (without the shared
    prelude; ``kernel.full_source`` is exactly what is compiled)."""

    def __init__(self, entry):
        self.kind = entry["kind"]            # "generated", "code", "library" or "library+epilogue"
        self.key = entry["key"] or None      # cache key (None for a library call alone)
        self.ops = list(entry["ops"])        # fused ops, each "op  [shape]  file.py:line"
        self.library = entry["library"]      # e.g. "onednn convolution forward (jit:avx512_core)"
        self.contraction = entry["contraction"]
        self.header = entry["header"]
        self.full_source = entry["body"]
        self.where = entry["cached"]         # "memory", "bundle", "disk", "library" or "" (would compile)

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
            cut = text.find("\ntypedef ")
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
        return f"<metajit kernel {self.key or '-'} {what}: {len(self.ops)} ops, {'cached in ' + self.where if self.where else 'not compiled yet'}>"

    def __str__(self):
        parts = [f"// key: {self.key or '(library call)'}  cached: {self.where or 'no'}"]
        if self.library:
            parts.append(f"// library call: {self.library}")
        if self.full_source:
            parts.append(self.header.rstrip("\n"))
            parts.append(self.source.rstrip("\n"))
        return "\n".join(parts) + "\n"


def inspect(*vars, device=None):
    """The kernels that computing `vars` would launch, in launch order; runs and compiles nothing."""
    if len(vars) == 1 and isinstance(vars[0], (list, tuple)):
        vars = tuple(vars[0])
    if device not in (None, "cpu"):
        raise ValueError(f"inspect: device={device!r} is not available in this build; the CPU ('cpu') is")
    return [Kernel(entry) for entry in _core.plan(list(vars))]
