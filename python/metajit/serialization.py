"""mj.save / mj.load: state dicts (nested dicts, lists and tuples of Vars, numpy arrays, numbers, strings and
None) in a safe file format.

The file is a numpy .npz archive: every array is one entry (a0, a1, ...) and the nesting is a JSON document
stored in the entry '__metajit__' as UTF-8 bytes. Loading uses allow_pickle=False and never unpickles, so
loading an untrusted file cannot run code.
"""
import json
import os
from collections import OrderedDict

import numpy as np

from ._core import Var

__all__ = ["save", "load"]

_STRUCTURE_ENTRY = "__metajit__"
_FORMAT = "metajit-npz"
_VERSION = 1


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
                        "None and dicts/lists/tuples of them can be saved")


def save(obj, f):
    """Saves `obj` to `f` (a path, written exactly as given, or a binary file object)."""
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
    def __init__(self, archive, source):
        self.archive = archive
        self.source = source

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
        raise ValueError(f"load: {self.source} has an unknown entry kind {kind!r}")


def load(f):
    """Loads what save() wrote: Vars come back as Vars, numpy arrays as numpy arrays, dicts as OrderedDicts."""
    source = f"'{os.fspath(f)}'" if not hasattr(f, "read") else "the file"
    try:
        archive = np.load(f, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise ValueError(f"load: {source} is not a metajit save file (not a readable .npz archive: {error})") \
            from error
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
        return _Decoder(archive, source).decode(document.get("root"))
