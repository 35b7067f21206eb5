"""The deployment bundle file (.mjb): every compiled kernel a program used, plus a manifest saying what they
were compiled for, so a deployment machine serves them without ever running a compiler.

Layout: the line ``METAJIT-BUNDLE``, a line ``<format> <manifest bytes> <sha256 of manifest>``, the manifest
(JSON), then the entries back to back. The manifest lists each entry's key, offset, size and SHA-256, and the
target: metajit and ABI version, backend, compiler identity, CPU name and features. Any mismatch in a checksum
refuses the whole bundle: a kernel is native code, so a modified one must never run."""
import datetime
import hashlib
import json
import os

from .. import _core

MAGIC = b"METAJIT-BUNDLE\n"
FORMAT = 1


class BundleError(RuntimeError):
    """A bundle that is malformed, modified or built for another target."""


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _metajit_version():
    try:
        from importlib.metadata import version
        return version("metajit")
    except Exception:  # running from a source tree (PYTHONPATH=python)
        return "0.1.0+source"


def current_target():
    """What kernels compiled in this process are compiled for."""
    return {
        "metajit_version": _metajit_version(),
        "abi_version": _core.abi_version(),
        "backend": "cpu",
        "compiler": _core.compiler_identity(),
        "cpu": _core.host_cpu_name(),
        "cpu_features": _core.host_cpu_features(),
    }


def write_bundle(path, entries):
    """Writes `entries` (a list of (key, entry bytes)) to `path` atomically."""
    manifest = dict(current_target())
    manifest["format"] = FORMAT
    manifest["created"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    manifest["entries"] = []
    offset = 0
    for key, data in entries:
        manifest["entries"].append({"key": key, "offset": offset, "size": len(data), "sha256": _sha256(data)})
        offset += len(data)
    manifest_bytes = json.dumps(manifest, indent=1, sort_keys=True).encode()
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "wb") as file:
        file.write(MAGIC)
        file.write(f"{FORMAT} {len(manifest_bytes)} {_sha256(manifest_bytes)}\n".encode())
        file.write(manifest_bytes)
        for _, data in entries:
            file.write(data)
    os.replace(temporary, path)
    return manifest


def read_bundle(path):
    """(manifest, [(key, entry bytes)]) after checking every checksum; raises BundleError otherwise."""
    with open(path, "rb") as file:
        content = file.read()
    if not content.startswith(MAGIC):
        raise BundleError(f"{path} is not a metajit bundle (it does not start with {MAGIC.strip().decode()})")
    header_end = content.find(b"\n", len(MAGIC))
    try:
        version, manifest_size, manifest_hash = content[len(MAGIC):header_end].decode().split(" ")
        version, manifest_size = int(version), int(manifest_size)
    except (ValueError, UnicodeDecodeError):
        raise BundleError(f"{path}: the bundle header is damaged") from None
    if version != FORMAT:
        raise BundleError(f"{path} has bundle format {version}; this metajit reads format {FORMAT}")
    manifest_start = header_end + 1
    manifest_bytes = content[manifest_start:manifest_start + manifest_size]
    if len(manifest_bytes) != manifest_size or _sha256(manifest_bytes) != manifest_hash:
        raise BundleError(f"{path}: the manifest fails its checksum (the file was modified or truncated)")
    manifest = json.loads(manifest_bytes)
    data_start = manifest_start + manifest_size
    entries = []
    expected_end = data_start
    for record in manifest["entries"]:
        start = data_start + record["offset"]
        data = content[start:start + record["size"]]
        if len(data) != record["size"] or _sha256(data) != record["sha256"]:
            raise BundleError(f"{path}: kernel {record['key']} fails its checksum (the file was modified or "
                              f"truncated); refusing the whole bundle")
        entries.append((record["key"], data))
        expected_end = max(expected_end, start + record["size"])
    if len(content) != expected_end:
        raise BundleError(f"{path}: {len(content) - expected_end} unexpected bytes after the last kernel")
    return manifest, entries


def incompatibility(manifest):
    """Why kernels from `manifest` cannot run here, or None when they can."""
    here = current_target()
    if manifest.get("abi_version") != here["abi_version"]:
        return f"it was built for metajit ABI {manifest.get('abi_version')}, this metajit has ABI {here['abi_version']}"
    if manifest.get("backend") != here["backend"]:
        return f"it holds {manifest.get('backend')} kernels, this process runs on {here['backend']}"
    if manifest.get("cpu") != here["cpu"]:
        return f"it was built for CPU {manifest.get('cpu')}, this machine is {here['cpu']}"
    if manifest.get("cpu_features") != here["cpu_features"]:
        theirs, ours = set(manifest.get("cpu_features", "").split(",")), set(here["cpu_features"].split(","))
        missing = sorted(feature for feature in theirs - ours if feature.startswith("+"))
        return ("its CPU features differ from this machine's" +
                (f" (this machine lacks {', '.join(feature[1:] for feature in missing[:8])})" if missing else ""))
    if manifest.get("compiler") != here["compiler"]:
        return f"it was compiled by '{manifest.get('compiler')}', this metajit compiles with '{here['compiler']}'"
    return None
