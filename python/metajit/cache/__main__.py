"""python -m metajit.cache: look after the kernel cache and pack deployment bundles.

    info                      where the cache is, how big, what it compiles for
    list                      every cached kernel: key, size, what it computes
    show KEY                  a cached kernel's source (a unique key prefix is enough)
    verify                    check every entry; corrupt ones are discarded (they rebuild on next use)
    clear                     delete every cached kernel
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


def command_info(arguments):
    directory = _core.cache_dir()
    keys = _core.disk_keys()
    total = 0
    for key in keys:
        path = os.path.join(directory, key[:2], key + ".mjk")
        total += os.path.getsize(path) if os.path.exists(path) else 0
    print(f"directory:      {directory or '(none: memory only)'}{'' if _core.disk_enabled() else ' (disabled)'}")
    print(f"entries:        {len(keys)} ({total / 1e6:.1f} MB)")
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
