"""The kernel cache from Python: deployment bundles, recording the kernels a program uses, and the facts the
``python -m metajit.cache`` command shows.

    with mj.cache.record() as recording:      # run the model once
        model(x).numpy()
    recording.save("model.mjb")

    mj.cache.load_bundle("model.mjb")         # at deployment (or METAJIT_BUNDLE=model.mjb)
"""
import atexit
import contextlib
import os
import warnings

from .. import _core
from .bundle import BundleError, current_target, incompatibility, read_bundle, write_bundle

__all__ = ["record", "Recording", "load_bundle", "BundleError", "directory", "compile_policy",
           "set_compile_policy", "MissingKernelError", "current_target"]

MissingKernelError = _core.MissingKernelError


class Recording:
    """The kernels used inside a ``record()`` block (available once the block has ended)."""

    def __init__(self):
        self.keys = []

    def save(self, path):
        """Writes the recorded kernels to a bundle file at `path`; returns its manifest."""
        entries = []
        for key in self.keys:
            data = _core.entry_bytes(key)
            if data is None:
                raise BundleError(f"kernel {key} was used but its compiled object is no longer available")
            entries.append((key, data))
        return write_bundle(os.fspath(path), entries)

    def __len__(self):
        return len(self.keys)

    def __repr__(self):
        return f"<metajit.cache.Recording of {len(self.keys)} kernels>"


@contextlib.contextmanager
def record():
    """Records every kernel fetched inside the block (compiled, or found in any cache). Blocks may nest."""
    recording = Recording()
    identifier = _core.start_recording()
    try:
        yield recording
    finally:
        recording.keys = _core.stop_recording(identifier)


def load_bundle(path):
    """Serves kernels from the bundle at `path` from now on (before the disk cache). Returns its manifest.

    A modified or malformed bundle raises BundleError. A bundle built for another target (CPU, compiler, ABI)
    is refused: with compile policy 'never' that raises, otherwise it warns and kernels are compiled here."""
    path = os.fspath(path)
    manifest, entries = read_bundle(path)
    reason = incompatibility(manifest)
    if reason:
        message = f"bundle {path} cannot be used on this machine: {reason}"
        if not _core.compile_allowed():
            raise BundleError(message + "; and METAJIT_COMPILE=never forbids compiling its kernels here")
        warnings.warn(message + "; its kernels will be compiled here instead", RuntimeWarning, stacklevel=2)
        return manifest
    _core.add_bundle_entries(entries)
    return manifest


def directory():
    """The on-disk kernel cache directory ('' when disabled)."""
    return _core.cache_dir()


def compile_policy():
    """'auto' (compile what is missing) or 'never' (METAJIT_COMPILE=never: only bundles and the cache)."""
    return "auto" if _core.compile_allowed() else "never"


def set_compile_policy(policy):
    if policy not in ("auto", "never"):
        raise ValueError(f"compile policy must be 'auto' or 'never', got {policy!r}")
    _core.set_compile_allowed(policy == "auto")


def _start_from_environment():
    bundle = _core.flag_value("METAJIT_BUNDLE")
    if bundle:
        load_bundle(bundle)
    output = _core.flag_value("METAJIT_RECORD_BUNDLE")  # set by `python -m metajit.cache pack`
    if output:
        identifier = _core.start_recording()

        def save():
            recording = Recording()
            recording.keys = _core.stop_recording(identifier)
            recording.save(output)

        atexit.register(save)
