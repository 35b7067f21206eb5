"""python -m metajit.cache: look after the kernel cache and pack deployment bundles.

    info                      where the cache is, how big (and its size limit), what it compiles for
    list                      every cached kernel: key, size, what it computes
    show KEY                  a cached kernel's source (a unique key prefix is enough)
    verify                    check every entry; corrupt ones are discarded (they rebuild on next use)
    clear                     delete every cached kernel
    prune [--max-size SIZE]   remove least recently used kernels until the cache fits SIZE (default: its limit,
                              METAJIT_CACHE_MAX_SIZE, 2G unless set)
    pack --output F -- CMD    run CMD (e.g. python train.py) and pack every kernel it used into bundle F
"""
import argparse
import os
import subprocess
import sys

import metajit  # noqa: F401  (initialises the runtime)
from .. import _core
from . import read_bundle


def _entries():
    for key in _core.disk_keys():
        data = _core.disk_load(key)
        decoded = _core.decode_entry(data) if data is not None else None
        yield key, data, decoded


def _summary(source):
    for line in source.splitlines():
        if line.startswith("// metajit "):
            return line[len("// metajit "):]
    return "?"


def _size_text(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def _parse_size(text):
    """'2G', '500M', '1024' -> bytes (powers of 1024), as METAJIT_CACHE_MAX_SIZE reads them."""
    scales = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
              "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TB": 1 << 40,
              "TIB": 1 << 40}
    stripped = text.strip().upper()
    number = stripped.rstrip("KMGTIB")
    try:
        value = float(number)
    except ValueError:
        value = -1
    suffix = stripped[len(number):]
    if value < 0 or suffix not in scales:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; use bytes or a number with K, M, G or T (2G)")
    return int(value * scales[suffix])


def command_info(arguments):
    directory = _core.cache_dir()
    keys = _core.disk_keys()
    total = _core.disk_total_bytes()
    limit = _core.disk_size_limit()
    print(f"directory:      {directory or '(none: memory only)'}{'' if _core.disk_enabled() else ' (disabled)'}")
    print(f"entries:        {len(keys)} ({_size_text(total)})")
    print(f"size limit:     {_size_text(limit) + ' (METAJIT_CACHE_MAX_SIZE)' if limit else 'none'}; least "
          "recently used kernels are removed past it")
    print(f"compiler:       {_core.compiler_identity().split(' triple=')[0]}")
    print(f"target:         cpu={_core.host_cpu_name()}")
    print(f"abi version:    {_core.abi_version()}")
    print(f"compile policy: {'auto' if _core.compile_allowed() else 'never'}")
    return 0


def command_list(arguments):
    count = 0
    for key, data, decoded in _entries():
        if decoded is None:
            print(f"{key}  (unreadable entry)")
            continue
        print(f"{key}  {len(decoded[0]):>8} B  {_summary(decoded[1])}")
        count += 1
    print(f"{count} kernels in {_core.cache_dir()}", file=sys.stderr)
    return 0


def command_show(arguments):
    matches = [key for key in _core.disk_keys() if key.startswith(arguments.key)]
    if not matches:
        print(f"no cached kernel has a key starting with {arguments.key!r}", file=sys.stderr)
        return 1
    if len(matches) > 1:
        print(f"{len(matches)} kernels match {arguments.key!r}; give more of the key: {', '.join(matches[:5])}",
              file=sys.stderr)
        return 1
    data = _core.disk_load(matches[0])
    decoded = _core.decode_entry(data) if data is not None else None
    if decoded is None:
        print(f"kernel {matches[0]} is corrupt and was discarded", file=sys.stderr)
        return 1
    print(f"// key: {matches[0]}")
    print(decoded[1], end="")
    return 0


def command_verify(arguments):
    good = bad = 0
    for key, data, decoded in _entries():
        if decoded is None:
            bad += 1
            print(f"discarded {key}: corrupt or from another metajit version")
        else:
            good += 1
    print(f"{good} entries intact, {bad} discarded")
    return 0 if bad == 0 else 1


def command_clear(arguments):
    count = len(_core.disk_keys())
    _core.disk_clear()
    print(f"removed {count} kernels from {_core.cache_dir()}")
    return 0


def command_prune(arguments):
    target = arguments.max_size if arguments.max_size is not None else _core.disk_size_limit()
    if not target and arguments.max_size is None:
        print("prune: the cache has no size limit (METAJIT_CACHE_MAX_SIZE is unlimited); give --max-size")
        return 2
    result = _core.disk_prune(target)
    print(f"removed {result['removed']} least recently used kernels ({_size_text(result['freed'])}); "
          f"{result['entries']} kernels ({_size_text(result['remaining'])}) remain in {_core.cache_dir()}")
    return 0


def command_pack(arguments):
    command = arguments.command
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("pack: give the command to run after --, e.g. pack --output model.mjb -- python infer.py",
              file=sys.stderr)
        return 2
    output = os.path.abspath(arguments.output)
    if os.path.exists(output):
        os.remove(output)
    environment = dict(os.environ, METAJIT_RECORD_BUNDLE=output)
    result = subprocess.run(command, env=environment)
    if result.returncode != 0:
        print(f"pack: {' '.join(command)} exited with status {result.returncode}; no bundle written",
              file=sys.stderr)
        if os.path.exists(output):
            os.remove(output)
        return result.returncode
    if not os.path.exists(output):
        print("pack: the command did not import metajit, so there is nothing to pack", file=sys.stderr)
        return 1
    manifest, entries = read_bundle(output)
    size = sum(len(data) for _, data in entries)
    print(f"packed {len(entries)} kernels ({size / 1e6:.2f} MB) into {output} for cpu={manifest['cpu']}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m metajit.cache", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="name", required=True)
    commands.add_parser("info", help="cache directory, size and target").set_defaults(run=command_info)
    commands.add_parser("list", help="list cached kernels").set_defaults(run=command_list)
    show = commands.add_parser("show", help="print a cached kernel's source")
    show.add_argument("key")
    show.set_defaults(run=command_show)
    commands.add_parser("verify", help="check every entry, discard corrupt ones").set_defaults(run=command_verify)
    commands.add_parser("clear", help="delete every cached kernel").set_defaults(run=command_clear)
    prune = commands.add_parser("prune", help="remove least recently used kernels down to a size")
    prune.add_argument("--max-size", type=_parse_size, default=None,
                       help="the size to fit (bytes, or with K/M/G/T); default: the cache's limit")
    prune.set_defaults(run=command_prune)
    pack = commands.add_parser("pack", help="run a command and pack the kernels it used into a bundle")
    pack.add_argument("--output", "-o", required=True)
    pack.add_argument("command", nargs=argparse.REMAINDER)
    pack.set_defaults(run=command_pack)
    arguments = parser.parse_args(argv)
    return arguments.run(arguments)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `... list | head`: the reader left; not an error
        sys.stderr.close()
        sys.exit(0)
