"""mj.save / mj.load: state dicts (nested dicts, lists and tuples of Vars, numpy arrays, numbers, strings and
None) in a safe file format; mj.load also reads PyTorch checkpoints and safetensors files.

metajit's file is a numpy .npz archive: every array is one entry (a0, a1, ...) and the nesting is a JSON
document stored in the entry '__metajit__' as UTF-8 bytes. Loading uses allow_pickle=False and never unpickles,
so loading an untrusted file cannot run code. The one exception is a whole nn.Module saved as a value
(torch.save(model) style): it is stored as a pickle, and mj.load refuses it unless weights_only=False.

mj.load picks the reader from the file's content, not its name: a zip archive holding '__metajit__.npy' is
metajit's format, one holding '<folder>/data.pkl' is torch.save's, a pickle of PyTorch's magic number is
torch.save's legacy format, an 8-byte length followed by a JSON header is safetensors
(_torch_checkpoint.py reads those three, through a restricted unpickler).

This module also makes Vars picklable (copyreg): a Var pickles as its numpy value, dtype, requires_grad and
whether it is an nn.Parameter; its gradient and graph are not kept. It must not unpickle anything while
loading metajit's format unless the caller passed weights_only=False.
"""
import copyreg
import io
import json
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np

from ._core import Var
from . import _torch_checkpoint

__all__ = ["save", "load"]

_STRUCTURE_ENTRY = "__metajit__"
_FORMAT = "metajit-npz"
_VERSION = 1
_SNIFF_BYTES = 512  # enough for every format's signature (a tar header's "ustar" is at byte 257)


def _rebuild_var(value, dtype, requires_grad, is_parameter):
    """Unpickles a Var (the reduction below names this function)."""
    from . import array
    var = array(np.asarray(value), dtype=dtype)
    if is_parameter:
        from .nn.parameter import _mark
        _mark(var)
    if requires_grad:
        var.requires_grad = True
    return var


def _reduce_var(var):
    from .nn.parameter import _is_parameter
    return _rebuild_var, (var.numpy(), var.dtype, bool(var.requires_grad), _is_parameter(var))


# So pickle.dumps(model) and multiprocessing can carry Vars (copy.deepcopy uses Var.__deepcopy__ instead).
copyreg.pickle(Var, _reduce_var)


class _Encoder:
    def __init__(self):
        self.arrays = {}

    def _store(self, array):
        name = f"a{len(self.arrays)}"
        self.arrays[name] = array
        return name

    def encode(self, value, where):
        if isinstance(value, Var):
            return {"var": self._store(value.numpy())}
        from .nn import Module
        if isinstance(value, Module):
            # A whole model (torch.save(model) style) can only be kept as a pickle; mj.load refuses it unless
            # weights_only=False.
            pickled = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            return {"pickled_module": self._store(np.frombuffer(pickled, dtype=np.uint8))}
        if isinstance(value, np.ndarray):
            if value.dtype.hasobject:
                raise TypeError(f"save: {where} is a numpy array of Python objects, which cannot be saved safely")
            return {"ndarray": self._store(value)}
        if isinstance(value, np.generic):
            return {"numpy_scalar": self._store(np.asarray(value))}
        if value is None or isinstance(value, (bool, str)):
            return {"value": value}
        if isinstance(value, int):
            return {"int": str(value)}  # as text: JSON readers may round large integers
        if isinstance(value, float):
            return {"float": repr(value)}  # as text: JSON has no inf/nan
        if isinstance(value, dict):
            return {"dict": [[self.encode(key, f"{where} key {key!r}"), self.encode(item, f"{where}[{key!r}]")]
                             for key, item in value.items()]}
        if isinstance(value, (list, tuple)):
            kind = "list" if isinstance(value, list) else "tuple"
            return {kind: [self.encode(item, f"{where}[{index}]") for index, item in enumerate(value)]}
        raise TypeError(f"save: {where} is a {type(value).__name__}; only Vars, numpy arrays, numbers, strings, "
                        "None, nn.Modules and dicts/lists/tuples of them can be saved")


def save(obj, f):
    """Saves `obj` to `f` (a path, written exactly as given, or a binary file object) in metajit's format.

    A whole nn.Module (anywhere in `obj`) is stored pickled; loading it needs mj.load(f, weights_only=False)."""
    encoder = _Encoder()
    root = encoder.encode(obj, "the saved object")
    document = json.dumps({"format": _FORMAT, "version": _VERSION, "root": root})
    entries = dict(encoder.arrays)
    entries[_STRUCTURE_ENTRY] = np.frombuffer(document.encode("utf-8"), dtype=np.uint8)
    if hasattr(f, "write"):
        np.savez(f, **entries)
        return
    path = os.fspath(f)
    # Written beside the target and renamed, so an interrupted save never leaves a truncated file.
    temporary = f"{path}.tmp{os.getpid()}"
    try:
        with open(temporary, "wb") as handle:
            np.savez(handle, **entries)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


class _Decoder:
    def __init__(self, archive, source, trusted):
        self.archive = archive
        self.source = source
        self.trusted = trusted

    def _array(self, name):
        if not isinstance(name, str) or name == _STRUCTURE_ENTRY or name not in self.archive.files:
            raise ValueError(f"load: {self.source} refers to a missing array entry {name!r}")
        return self.archive[name]

    def decode(self, node):
        from . import array
        if not isinstance(node, dict) or len(node) != 1:
            raise ValueError(f"load: {self.source} has a malformed structure entry: {node!r:.80}")
        (kind, payload), = node.items()
        if kind == "var":
            return array(self._array(payload))
        if kind == "ndarray":
            return self._array(payload)
        if kind == "numpy_scalar":
            return self._array(payload)[()]
        if kind == "value" and (payload is None or isinstance(payload, (bool, str))):
            return payload
        if kind == "int":
            return int(payload)
        if kind == "float":
            return float(payload)
        if kind == "dict":
            return OrderedDict((self.decode(key), self.decode(item)) for key, item in payload)
        if kind == "list":
            return [self.decode(item) for item in payload]
        if kind == "tuple":
            return tuple(self.decode(item) for item in payload)
        if kind == "pickled_module":
            if not self.trusted:
                raise pickle.UnpicklingError(
                    f"load: {self.source} holds a pickled nn.Module (a whole model was saved), and unpickling "
                    "can run arbitrary code; pass weights_only=False only if you trust the file's author")
            return pickle.loads(self._array(payload).tobytes())
        raise ValueError(f"load: {self.source} has an unknown entry kind {kind!r}")


def load(f, map_location=None, weights_only=True):
    """Loads a checkpoint from `f` (a path or a binary file object), whatever wrote it:

    * metajit's own format (mj.save): Vars come back as Vars, numpy arrays as numpy arrays, dicts as
      OrderedDicts;
    * PyTorch's torch.save (zip format, or the legacy non-zip one): tensors come back as metajit Vars
      (nn.Parameters as Parameters), everything else as the plain values it was;
    * safetensors: an OrderedDict name -> Var.

    The format is recognised from the content, not the file name. weights_only=True (the default) never runs
    code from the file: a PyTorch pickle may name only the globals a checkpoint needs (see
    docs/checkpoints.md), and anything else is refused with an error naming it. weights_only=False trusts the
    file (a whole pickled model). map_location is accepted for PyTorch compatibility and ignored: the values
    become metajit Vars, which live on metajit's device."""
    del map_location  # every tensor becomes a Var; metajit places Vars itself
    trusted = not weights_only
    source = f"'{os.fspath(f)}'" if not hasattr(f, "read") else "the file"
    if hasattr(f, "read"):
        handle, owned = f, False
        if not (hasattr(f, "seekable") and f.seekable()):
            handle = io.BytesIO(f.read())  # the readers below need to look back
    else:
        handle, owned = open(os.fspath(f), "rb"), True
    try:
        start = handle.tell()
        head = handle.read(_SNIFF_BYTES)
        total_size = handle.seek(0, io.SEEK_END) - start
        handle.seek(start)
        if head.startswith(b"PK"):
            try:
                with zipfile.ZipFile(handle) as archive:
                    names = archive.namelist()
                    if _STRUCTURE_ENTRY + ".npy" not in names and _torch_checkpoint.is_torch_zip(names):
                        return _torch_checkpoint.load_torch_zip(archive, source, trusted)
            except zipfile.BadZipFile:
                pass  # reported below as an unreadable file
            handle.seek(start)
        elif _torch_checkpoint.is_safetensors(head, total_size):
            return _torch_checkpoint.load_safetensors(handle.read(), source)
        elif _torch_checkpoint.is_legacy_torch(head):
            return _torch_checkpoint.load_torch_legacy(handle, source, trusted)
        elif head[257:262] == b"ustar":
            raise ValueError(f"load: {source} is a tar archive (PyTorch's pre-1.0 checkpoint format), which "
                             "metajit does not read; re-save it with a recent PyTorch")
        return _load_metajit(handle, source, trusted)
    finally:
        if owned:
            handle.close()


def _load_metajit(handle, source, trusted):
    try:
        archive = np.load(handle, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise ValueError(f"load: {source} is not a metajit save file, a PyTorch checkpoint or a safetensors file "
                         f"(not a readable .npz archive: {error})") from error
    if not hasattr(archive, "files"):
        raise ValueError(f"load: {source} is a single .npy array, not a metajit save file")
    with archive:
        if _STRUCTURE_ENTRY not in archive.files:
            raise ValueError(f"load: {source} is an .npz archive without metajit's '{_STRUCTURE_ENTRY}' entry "
                             "(not written by mj.save)")
        try:
            document = json.loads(archive[_STRUCTURE_ENTRY].tobytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"load: {source} has a corrupt structure entry ({error})") from error
        if not isinstance(document, dict) or document.get("format") != _FORMAT:
            raise ValueError(f"load: {source} is not in the {_FORMAT} format")
        if document.get("version") != _VERSION:
            raise ValueError(f"load: {source} has format version {document.get('version')}, this metajit reads "
                             f"version {_VERSION}")
        return _Decoder(archive, source, trusted).decode(document.get("root"))
