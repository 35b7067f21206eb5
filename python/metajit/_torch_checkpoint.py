"""Reads PyTorch checkpoints (torch.save's zip format and its older non-zip format) and safetensors files into
metajit Vars, without PyTorch. serialization.load dispatches here on a file's content.

The pickle inside a PyTorch checkpoint is read by a restricted unpickler: each global the pickle names is
looked up in a fixed table of what a state dict or training checkpoint needs (tensor rebuilders, storage
types, dtypes, torch.Size, OrderedDict, sets, numpy scalars and arrays) and resolved to metajit's own
stand-ins; any other global is refused with an error naming it, before anything is called.

Must not: import torch; call anything a pickle names outside that table unless the caller passed
weights_only=False (which means the file is trusted); read memory outside a storage's bytes (sizes, strides and
offsets are checked before numpy's as_strided).
"""
import io
import pickle
from collections import OrderedDict

import numpy as np

__all__ = ["is_torch_zip", "is_legacy_torch", "is_safetensors", "load_torch_zip", "load_torch_legacy",
           "load_safetensors"]

_LEGACY_MAGIC_NUMBER = 0x1950a86a20f9469cfc6c
_LEGACY_PROTOCOL_VERSION = 1001

# ------------------------------------------------------------------------------------------------ dtypes


def _bfloat16_to_float32(bits):
    # bfloat16 is the upper half of a float32, so widening is exact.
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _float8_e5m2_to_float32(bits):
    # float8 e5m2 is the upper byte of a float16 (same exponent width and bias).
    return (bits.astype(np.uint16) << 8).view(np.float16).astype(np.float32)


def _float8_e4m3fn_table():
    codes = np.arange(256)
    sign = np.where(codes >= 128, -1.0, 1.0)
    exponent = (codes >> 3) & 0xF
    mantissa = (codes & 0x7).astype(np.float64)
    magnitude = np.where(exponent == 0, mantissa / 8 * 2.0 ** -6, (1 + mantissa / 8) * 2.0 ** (exponent - 7))
    values = sign * magnitude
    values[(exponent == 15) & (codes & 0x7 == 7)] = np.nan  # e4m3fn has no infinities, only these NaNs
    return values.astype(np.float32)


def _float8_e4m3fn_to_float32(bits):
    return _float8_e4m3fn_table()[bits]


def _uint64_to_int64(values):
    if values.size and values.max() >= 2 ** 63:
        raise ValueError("a uint64 tensor holds values above the int64 range; metajit has no uint64 dtype")
    return values.astype(np.int64)


# dtype name -> (bytes per element, numpy type the stored bytes are read as, conversion to a metajit dtype or
# None when the numpy type is one). The widenings are exact: metajit has no bfloat16, int16 or unsigned types
# wider than a byte. A conversion that is a string is the reason the dtype is refused.
_DTYPES = {
    "float64": (8, "f8", None),
    "float32": (4, "f4", None),
    "float16": (2, "f2", None),
    "bfloat16": (2, "u2", _bfloat16_to_float32),
    "int64": (8, "i8", None),
    "int32": (4, "i4", None),
    "int16": (2, "i2", lambda values: values.astype(np.int32)),
    "int8": (1, "i1", None),
    "uint8": (1, "u1", None),
    "bool": (1, "u1", lambda values: values != 0),  # any nonzero byte is true, as in PyTorch
    "uint16": (2, "u2", lambda values: values.astype(np.int32)),
    "uint32": (4, "u4", lambda values: values.astype(np.int64)),
    "uint64": (8, "u8", _uint64_to_int64),
    "float8_e4m3fn": (1, "u1", _float8_e4m3fn_to_float32),
    "float8_e5m2": (1, "u1", _float8_e5m2_to_float32),
    "complex64": (8, "c8", "metajit has no complex dtypes"),
    "complex128": (16, "c16", "metajit has no complex dtypes"),
}

# PyTorch's typed storage classes (the storage type a checkpoint names for a tensor of that dtype).
_STORAGE_CLASS_DTYPES = {
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
    "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
}

# safetensors dtype codes -> dtype names above.
_SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
    "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool", "U16": "uint16", "U32": "uint32",
    "U64": "uint64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "C64": "complex64",
}


# ------------------------------------------------------------------------------------------------ storages


class _Storage:
    """The bytes of one PyTorch storage. dtype is None for an untyped (byte) storage; data is None until the
    legacy format's storage records have been read."""

    def __init__(self, key, dtype, data, byteorder):
        self.key = key
        self.dtype = dtype
        self.data = data
        self.byteorder = byteorder


class _StorageType:
    """What the unpickler returns for a storage class global: a marker naming the element dtype."""

    def __init__(self, dtype):
        self.dtype = dtype


class _TensorType:
    """What the unpickler returns for torch.Tensor and torch.nn.Parameter (arguments of _rebuild_from_type_v2)."""

    def __init__(self, is_parameter):
        self.is_parameter = is_parameter


_PENDING = object()  # a tensor whose storage bytes are not read yet (first pass over a legacy file)


def _check_integers(values, what, source):
    if not isinstance(values, (tuple, list)) or not all(isinstance(value, int) and not isinstance(value, bool)
                                                       and value >= 0 for value in values):
        raise pickle.UnpicklingError(f"load: {source} has a tensor with a malformed {what}: {values!r:.80}")
    return tuple(values)


def _tensor_from_storage(storage, offset, size, stride, dtype, source):
    """A metajit Var holding the elements that (offset, size, stride) select from storage's bytes."""
    from . import array
    if storage.data is None:
        return _PENDING
    if dtype not in _DTYPES:
        raise pickle.UnpicklingError(f"load: {source} has a tensor of unsupported dtype {dtype!r}")
    size = _check_integers(size, "size", source)
    stride = _check_integers(stride, "stride", source)
    if not isinstance(offset, int) or offset < 0 or len(size) != len(stride):
        raise pickle.UnpicklingError(f"load: {source} has a tensor with a malformed storage offset or stride")
    itemsize, stored_type, conversion = _DTYPES[dtype]
    if isinstance(conversion, str):
        raise ValueError(f"load: {source} has a {dtype} tensor, which metajit cannot represent ({conversion})")
    stored_type = np.dtype(stored_type).newbyteorder("<" if storage.byteorder == "little" else ">")
    element_count = len(storage.data) // itemsize
    if 0 in size:
        values = np.zeros(size, dtype=stored_type)
    else:
        # Bounds check before as_strided, which would otherwise read whatever memory the strides point at.
        last = offset + sum((extent - 1) * step for extent, step in zip(size, stride))
        if last >= element_count:
            raise pickle.UnpicklingError(
                f"load: {source} has a tensor (size {size}, stride {stride}, offset {offset}) that reaches past "
                f"the end of its storage '{storage.key}' of {element_count} elements")
        base = np.frombuffer(storage.data, dtype=stored_type, count=element_count)
        view = np.lib.stride_tricks.as_strided(base[offset:], shape=size,
                                               strides=[step * itemsize for step in stride], writeable=False)
        values = np.array(view)  # a contiguous copy: tensors that share a storage must not share the result
    if values.dtype.byteorder not in ("=", "|"):
        values = values.astype(values.dtype.newbyteorder("="))
    if conversion is not None:
        values = conversion(values)
    return array(values)


# ------------------------------------------------------------------------------------------------ unpickler

# Python 2 module names that pickle protocol 2 writes (torch.save's default protocol).
_PYTHON2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}


def _encode_latin1(text, encoding="latin1"):
    # Protocol 2 pickles bytes as _codecs.encode(text, 'latin1'); nothing else is accepted.
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("load: _codecs.encode is accepted only as protocol 2's bytes encoding")
    return text.encode("latin-1")


def _make_bytearray(*arguments):
    # Only from text or bytes (protocol 2 writes bytearray(text, 'latin-1')); bytearray(n) would allocate n bytes.
    if not arguments or not isinstance(arguments[0], (str, bytes)):
        raise pickle.UnpicklingError("load: bytearray is accepted only from text or bytes")
    return bytearray(*arguments)


def _numpy_dtype(spec, align=False, copy=True):
    dtype = np.dtype(spec, align, copy)
    if dtype.hasobject:
        raise pickle.UnpicklingError("load: numpy object dtypes are refused")
    return dtype


def _numpy_scalar(dtype, data=None):
    if not isinstance(dtype, np.dtype) or dtype.hasobject or not isinstance(data, bytes):
        raise pickle.UnpicklingError("load: a numpy scalar must have a non-object dtype and bytes")
    return np.frombuffer(data, dtype=dtype, count=1)[0]


def _numpy_reconstruct(array_type, shape, typecode):
    if array_type is not np.ndarray:
        raise pickle.UnpicklingError("load: only plain numpy arrays are accepted")
    # The shape argument is ignored: the array's real contents come from its state, and an empty start avoids
    # allocating whatever shape the pickle names.
    return np.ndarray((0,), dtype=np.uint8)


class _CheckpointUnpickler(pickle.Unpickler):
    """Unpickler for a PyTorch checkpoint's data pickle. storage_reader(key, dtype, numel, view) returns the
    _Storage for a persistent id; trusted=True (weights_only=False) lets other globals resolve normally."""

    def __init__(self, file, source, storage_reader=None, trusted=False):
        super().__init__(file)
        self.source = source
        self.storage_reader = storage_reader
        self.trusted = trusted
        self.allowed = self._allowed_globals()

    def _allowed_globals(self):
        allowed = {
            ("torch._utils", "_rebuild_tensor_v2"): self._rebuild_tensor_v2,
            ("torch._utils", "_rebuild_tensor_v3"): self._rebuild_tensor_v3,
            ("torch._utils", "_rebuild_tensor"): self._rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): self._rebuild_parameter,
            ("torch._utils", "_rebuild_parameter_with_state"): self._rebuild_parameter_with_state,
            ("torch._tensor", "_rebuild_from_type_v2"): self._rebuild_from_type_v2,
            ("torch", "Tensor"): _TensorType(is_parameter=False),
            ("torch.nn.parameter", "Parameter"): _TensorType(is_parameter=True),
            ("torch", "Size"): tuple,
            ("torch", "device"): self._device,
            ("torch.storage", "UntypedStorage"): _StorageType(None),
            ("torch", "UntypedStorage"): _StorageType(None),
            ("collections", "OrderedDict"): OrderedDict,
            ("builtins", "set"): set,
            ("builtins", "frozenset"): frozenset,
            ("builtins", "complex"): complex,
            ("builtins", "slice"): slice,
            ("builtins", "bytearray"): _make_bytearray,
            ("_codecs", "encode"): _encode_latin1,
        }
        for class_name, dtype in _STORAGE_CLASS_DTYPES.items():
            allowed[("torch", class_name)] = _StorageType(dtype)
        for dtype in _DTYPES:
            allowed[("torch", dtype)] = dtype  # a torch dtype value comes back as its name, metajit's spelling
        for numpy_module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            allowed[(numpy_module, "scalar")] = _numpy_scalar
            allowed[(numpy_module, "_reconstruct")] = _numpy_reconstruct
        allowed[("numpy", "dtype")] = _numpy_dtype
        allowed[("numpy", "ndarray")] = np.ndarray
        return allowed

    def find_class(self, module, name):
        module = _PYTHON2_MODULES.get(module, module)
        if self.trusted and module.split(".")[0] == "numpy":
            return super().find_class(module, name)  # trusted: numpy's own object arrays and dtypes too
        resolved = self.allowed.get((module, name))
        if resolved is not None:
            return resolved
        if self.trusted:
            if module.split(".")[0] in ("torch", "__torch__"):
                # Even a trusted file cannot give PyTorch objects without PyTorch (and a half-built torch
                # module holding metajit Vars would be worse than an error).
                raise pickle.UnpicklingError(
                    f"load: {self.source} needs the PyTorch class '{module}.{name}', which metajit cannot build "
                    "(a whole pickled PyTorch model?); save and load its state_dict() instead")
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"load: refused the global '{module}.{name}' in {self.source}: with weights_only=True only tensors, "
            "storages, dtypes, torch.Size, containers, numbers, strings and numpy scalars/arrays are loaded. "
            "Pass weights_only=False only if you trust the file's author (it can then run arbitrary code).")

    def persistent_load(self, persistent_id):
        if not isinstance(persistent_id, tuple) or not persistent_id:
            raise pickle.UnpicklingError(f"load: {self.source} has a malformed persistent id {persistent_id!r:.80}")
        if persistent_id[0] == "module" and self.trusted:
            return persistent_id[1]  # the legacy format's module source records; only the class matters
        if persistent_id[0] != "storage" or len(persistent_id) not in (5, 6) or self.storage_reader is None:
            raise pickle.UnpicklingError(
                f"load: {self.source} has an unsupported persistent id {persistent_id!r:.80} (only storages are "
                "accepted)")
        storage_type, key, _location, numel = persistent_id[1:5]
        if not isinstance(storage_type, _StorageType) or not isinstance(key, str) or not isinstance(numel, int):
            raise pickle.UnpicklingError(f"load: {self.source} has a malformed storage record "
                                         f"{persistent_id!r:.120}")
        view = persistent_id[5] if len(persistent_id) == 6 else None
        return self.storage_reader(key, storage_type.dtype, numel, view)

    # The tensor rebuilders, under the names and argument orders PyTorch's checkpoints use.

    def _rebuild_tensor_v2(self, storage, storage_offset, size, stride, requires_grad=False,
                           backward_hooks=None, metadata=None):
        return self._tensor(storage, storage_offset, size, stride, requires_grad, storage_dtype=None)

    def _rebuild_tensor_v3(self, storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype,
                           metadata=None):
        return self._tensor(storage, storage_offset, size, stride, requires_grad, storage_dtype=dtype)

    def _rebuild_tensor(self, storage, storage_offset, size, stride):
        return self._tensor(storage, storage_offset, size, stride, False, storage_dtype=None)

    def _tensor(self, storage, storage_offset, size, stride, requires_grad, storage_dtype):
        if not isinstance(storage, _Storage):
            raise pickle.UnpicklingError(f"load: {self.source} rebuilds a tensor from a {type(storage).__name__}, "
                                         "not a storage")
        dtype = storage_dtype if storage_dtype is not None else storage.dtype
        if dtype is None:
            raise pickle.UnpicklingError(f"load: {self.source} has a tensor on an untyped storage without a dtype")
        var = _tensor_from_storage(storage, storage_offset, size, stride, dtype, self.source)
        if var is not _PENDING and requires_grad and var.dtype.startswith("float"):
            var.requires_grad = True
        return var

    def _rebuild_parameter(self, data, requires_grad, backward_hooks=None):
        if data is _PENDING:
            return _PENDING
        from .nn import Parameter
        if not data.dtype.startswith("float"):
            requires_grad = False  # metajit allows gradients on floating-point Vars only
        return Parameter(data, requires_grad=bool(requires_grad))

    def _rebuild_parameter_with_state(self, data, requires_grad, backward_hooks=None, state=None):
        # state holds Python attributes set on the parameter; a Var has no attribute dictionary to put them in.
        return self._rebuild_parameter(data, requires_grad, backward_hooks)

    def _rebuild_from_type_v2(self, function, new_type, arguments, state=None):
        if not isinstance(new_type, _TensorType) or not callable(function):
            raise pickle.UnpicklingError(f"load: {self.source} rebuilds a tensor subclass, which is refused")
        result = function(*arguments)
        if new_type.is_parameter and result is not _PENDING:
            result = self._rebuild_parameter(result, result.requires_grad)
        return result

    @staticmethod
    def _device(kind, index=None):
        if not isinstance(kind, str) or not (index is None or isinstance(index, int)):
            raise pickle.UnpicklingError("load: malformed torch.device")
        return kind if index is None or ":" in kind else f"{kind}:{index}"


# ------------------------------------------------------------------------------------------------ zip format


def is_torch_zip(names):
    """True when a zip archive's entry names are torch.save's layout (one folder holding data.pkl)."""
    return _data_pickle_name(names) is not None


def _data_pickle_name(names):
    candidates = [name for name in names if name.endswith("/data.pkl") and name.count("/") == 1]
    return candidates[0] if len(candidates) == 1 else None


def load_torch_zip(archive, source, trusted):
    """The object a torch.save zip archive (an open zipfile.ZipFile) holds, tensors as metajit Vars."""
    names = archive.namelist()
    prefix = _data_pickle_name(names)[: -len("data.pkl")]
    if f"{prefix}constants.pkl" in names:
        raise ValueError(f"load: {source} is a TorchScript archive (torch.jit.save); metajit reads torch.save "
                         "checkpoints and state dicts, not scripted programs")
    byteorder = "little"
    if f"{prefix}byteorder" in names:
        byteorder = archive.read(f"{prefix}byteorder").decode("ascii", "replace").strip()
        if byteorder not in ("little", "big"):
            raise ValueError(f"load: {source} has an unknown byte order record {byteorder!r}")
    storages = {}

    def read_storage(key, dtype, numel, view):
        if key not in storages:
            entry = f"{prefix}data/{key}"
            if entry not in names:
                raise ValueError(f"load: {source} has no storage record '{entry}'")
            data = archive.read(entry)
            itemsize = _DTYPES[dtype][0] if dtype is not None else 1
            if len(data) < numel * itemsize:
                raise ValueError(f"load: {source} has a truncated storage record '{entry}' ({len(data)} bytes, "
                                 f"{numel * itemsize} expected)")
            storages[key] = _Storage(key, dtype, data, byteorder)
        return storages[key]

    with archive.open(f"{prefix}data.pkl") as pickled:
        return _CheckpointUnpickler(io.BytesIO(pickled.read()), source, read_storage, trusted).load()


# ------------------------------------------------------------------------------------------------ legacy format


def is_legacy_torch(head):
    """True when the first bytes are a pickle of the legacy format's magic number (any pickle protocol)."""
    if not head.startswith(b"\x80"):
        return False
    try:
        return _CheckpointUnpickler(io.BytesIO(head), "the file").load() == _LEGACY_MAGIC_NUMBER
    except Exception:  # not a pickle, or one whose first object is something else: not this format
        return False


def load_torch_legacy(handle, source, trusted):
    """The object a legacy (non-zip, PyTorch < 1.6 or _use_new_zipfile_serialization=False) checkpoint holds.

    The format is: pickles of the magic number, the protocol version and system information, the data pickle,
    the list of storage keys, then each storage's element count (8 bytes) and raw bytes. The storages come
    after the data pickle, so it is read twice: once to learn the storages, once to build the tensors."""
    data = io.BytesIO(handle.read())

    def plain(what):
        try:
            return _CheckpointUnpickler(data, source).load()
        except (pickle.UnpicklingError, EOFError, ValueError) as error:
            raise ValueError(f"load: {source} has a corrupt {what} record ({error})") from error

    plain("magic number")
    protocol = plain("protocol version")
    if protocol != _LEGACY_PROTOCOL_VERSION:
        raise ValueError(f"load: {source} has legacy protocol version {protocol!r}; {_LEGACY_PROTOCOL_VERSION} "
                         "is read")
    system_info = plain("system information")
    little_endian = not isinstance(system_info, dict) or system_info.get("little_endian", True)
    byteorder = "little" if little_endian else "big"
    storages = {}
    views = []  # (view storage, root storage, element offset, element count)

    def declare_storage(key, dtype, numel, view):
        if dtype is None:
            raise ValueError(f"load: {source} has an untyped storage, which the legacy format does not write")
        if view is not None:
            view_key, offset, view_size = view
            if view_key not in storages:
                root = storages.setdefault(key, _Storage(key, dtype, None, byteorder))
                storages[view_key] = _Storage(view_key, dtype, None, byteorder)
                views.append((storages[view_key], root, offset, view_size))
            return storages[view_key]
        return storages.setdefault(key, _Storage(key, dtype, None, byteorder))

    start = data.tell()
    _CheckpointUnpickler(data, source, declare_storage, trusted).load()  # first pass: tensors are _PENDING
    keys = plain("storage key list")
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise ValueError(f"load: {source} has a malformed storage key list")
    for key in keys:
        storage = storages.get(key)
        if storage is None:
            raise ValueError(f"load: {source} lists storage '{key}' that its data pickle never uses")
        count_bytes = data.read(8)
        if len(count_bytes) != 8:
            raise ValueError(f"load: {source} ends before storage '{key}'")
        count = int.from_bytes(count_bytes, byteorder)
        length = count * _DTYPES[storage.dtype][0]
        storage.data = data.read(length)
        if len(storage.data) != length:
            raise ValueError(f"load: {source} has a truncated storage '{key}'")
    for view, root, offset, view_size in views:
        itemsize = _DTYPES[root.dtype][0]
        view.data = root.data[offset * itemsize:(offset + view_size) * itemsize]
    after = data.tell()
    data.seek(start)
    result = _CheckpointUnpickler(data, source, lambda key, dtype, numel, view: storages[
        view[0] if view is not None else key], trusted).load()
    data.seek(after)
    return result


# ------------------------------------------------------------------------------------------------ safetensors


def is_safetensors(head, total_size):
    """True when the first bytes are a safetensors header: an 8-byte little-endian length, then a JSON object."""
    if len(head) < 9:
        return False
    header_length = int.from_bytes(head[:8], "little")
    return 2 <= header_length <= total_size - 8 and head[8:9] == b"{"


def load_safetensors(data, source):
    """An OrderedDict name -> Var from a safetensors file's bytes; the safetensors package parses and checks
    the header, the bytes are converted here (so bfloat16 and float8, which numpy lacks, work too)."""
    try:
        import safetensors
    except ImportError as error:
        raise ImportError(f"load: {source} is a safetensors file; reading it needs the 'safetensors' package "
                          "(pip install safetensors)") from error
    try:
        entries = safetensors.deserialize(data)
    except Exception as error:  # the package's SafetensorError has no stable import path
        raise ValueError(f"load: {source} is not a valid safetensors file ({error})") from error
    result = OrderedDict()
    for name, entry in entries:
        dtype = _SAFETENSORS_DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ValueError(f"load: {source} has tensor '{name}' of safetensors dtype {entry['dtype']}, which "
                             "metajit does not read")
        shape = tuple(entry["shape"])
        strides, step = [], 1
        for extent in reversed(shape):
            strides.insert(0, step)
            step *= max(extent, 1)
        storage = _Storage(name, dtype, bytes(entry["data"]), "little")
        result[name] = _tensor_from_storage(storage, 0, shape, strides, dtype, f"{source} (tensor '{name}')")
    return result
