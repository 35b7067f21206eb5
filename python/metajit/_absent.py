"""The PyTorch names metajit deliberately does not have, each with the reason and what to use instead, so a
ported program stops at its own line with a message instead of an AttributeError deep inside
(docs/pytorch_surface.md is the list for people). Only messages live here: nothing is implemented.
"""

_DOCS = "docs/pytorch_surface.md lists the PyTorch names metajit has"

_REASONS = {
    "onnx": "metajit does not export ONNX; deploy with kernel bundles (docs/deployment.md)",
    "jit": "torch.jit (TorchScript) has no counterpart; metajit compiles every call already, and mj.trace is planned",
    "export": "torch.export has no counterpart; deploy with kernel bundles (docs/deployment.md)",
    "fx": "torch.fx graph capture has no counterpart; mj.inspect shows metajit's graphs and kernels",
    "hub": "torch.hub (downloading models) is not provided; mj.models has the model definitions, and mj.load "
           "reads PyTorch checkpoints",
    "distributions": "torch.distributions is not provided",
    "fft": "torch.fft (Fourier transforms) is not provided",
    "special": "torch.special is not provided; mj.erf, mj.sigmoid, mj.log1p, ... are top-level functions",
    "sparse": "sparse tensors are not supported; metajit tensors are dense",
    "quantization": "quantization is not supported",
    "ao": "torch.ao (quantization, pruning) is not supported",
    "distributed": "distributed training is not available yet",
    "multiprocessing": "torch.multiprocessing is not provided; use Python's multiprocessing (DataLoader workers "
                       "are built in)",
    "nested": "nested (ragged) tensors are not supported",
    "mps": "Apple's MPS backend does not exist here; metajit runs on 'cpu' and 'cuda'",
    "xpu": "Intel's XPU backend does not exist here; metajit runs on 'cpu' and 'cuda'",
    "get_rng_state": "the random generator's state cannot be saved; reseed with mj.manual_seed",
    "set_rng_state": "the random generator's state cannot be restored; reseed with mj.manual_seed",
    "bfloat16": "bfloat16 is not a metajit dtype yet; use float16 or float32",
    "complex64": "complex dtypes are not supported",
    "complex128": "complex dtypes are not supported",
    "cfloat": "complex dtypes are not supported",
    "cdouble": "complex dtypes are not supported",
    "int16": "int16 is not a metajit dtype; use int32",
    "short": "int16 (torch.short) is not a metajit dtype; use int32",
    "uint16": "uint16 is not a metajit dtype; use int32",
    "uint32": "uint32 is not a metajit dtype; use int64",
    "uint64": "uint64 is not a metajit dtype; use int64",
    "float8_e4m3fn": "float8 dtypes are not supported",
    "float8_e5m2": "float8 dtypes are not supported",
    "sparse_coo": "sparse tensors are not supported",
    "channels_last": "memory formats are not exposed; metajit chooses layouts for library calls itself",
}


class AbsentNameError(AttributeError):
    """A PyTorch name metajit does not have. An AttributeError, so hasattr() and feature checks still work."""


def absent_name(name, namespace="metajit", torch_namespace="torch"):
    """The error for `namespace`.`name`: the reason when the name is a known PyTorch feature left out, else a
    plain missing-attribute message that points at the list of supported names."""
    if name.startswith("__"):
        return AttributeError(f"module {namespace!r} has no attribute {name!r}")
    reason = _REASONS.get(name) if namespace == "metajit" else None
    if reason:
        return AbsentNameError(f"{namespace}.{name} (PyTorch's {torch_namespace}.{name}) is not available: {reason}")
    return AbsentNameError(f"module {namespace!r} has no attribute {name!r}: {torch_namespace}.{name} is not "
                           f"available ({_DOCS})")
