#!/usr/bin/env bash
# Runs on a lent GPU machine (see README.md here): unpacks .device/runtime.tar.xz and links the Python extension
# for the machine's interpreter from the carried static libraries (.device/static) and the binding sources.
# Afterwards: export LD_LIBRARY_PATH=/opt/metajit-runtime/lib PYTHONPATH=$PWD/python
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
PYTHON=${PYTHON:-python3}
runtime=${METAJIT_RUNTIME:-/opt/metajit-runtime}
rm -rf "$runtime" && mkdir -p "$runtime"
tar -C "$runtime" -xJf .device/runtime.tar.xz
# The JIT was built with clang's resource directory compiled in; put the headers where it looks.
resource=/usr/lib/llvm-14/lib/clang/$(cat "$runtime/clang/version")
if [ ! -d "$resource/include" ]; then mkdir -p "$resource" && cp -r "$runtime/clang/include" "$resource/include"; fi
suffix=$($PYTHON -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
objects=$(mktemp -d)
includes="-I. -I.device/include $($PYTHON -m pybind11 --includes)"
ls python/bindings/*.cc | xargs -P8 -I{} sh -c \
  "g++ -O2 -std=gnu++17 -fPIC -fvisibility=hidden $includes -c {} -o $objects/\$(basename {} .cc).o"
libraries=$(ls "$runtime"/lib/*.so*)
g++ -shared -o "python/metajit/_core$suffix" "$objects"/*.o \
    -Wl,--start-group .device/static/*.a -Wl,--end-group $libraries \
    -Wl,-rpath,"$runtime/lib" -ldl -lpthread
echo "built python/metajit/_core$suffix"
