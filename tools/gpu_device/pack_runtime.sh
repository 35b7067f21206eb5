#!/usr/bin/env bash
# Packs what a lent GPU machine lacks to build and run metajit there: the machine has Python, PyTorch, the CUDA
# toolkit and a compiler, but not Debian's LLVM 14 / oneDNN. We carry the already-built static libraries, the
# binding sources' headers come with the tree, and the shared libraries the extension links against are copied
# from this host. The results travel with `run`'s carry (carry: [".device"]): .device/runtime.tar.xz (the shared
# libraries and clang's headers, about 58 MB, packed once: --static-only skips it) and .device/static/ (the
# project's static libraries, 4 MB, copied each time since they change with the code).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
extension=$(ls python/metajit/_core*.so | head -1)
# Only the archives the current build defines: build/ can hold stale ones from renamed targets, and two copies of
# the same objects would link whichever the linker meets first.
rm -rf .device/static && mkdir -p .device/static
grep -o '^build [^ :]*/libmetajit_[a-z_]*\.a' build/build.ninja | cut -d' ' -f2 | sed 's|^|build/|' \
  | xargs -I{} cp {} .device/static/
# oneDNN's headers: binding sources include libraries/ headers that name oneDNN types (a few hundred KB).
rm -rf .device/include && mkdir -p .device/include
cp -r /usr/include/oneapi /usr/include/dnnl*.h /usr/include/dnnl*.hpp .device/include/
if [ "${1:-}" = "--static-only" ] && [ -f .device/runtime.tar.xz ]; then exit 0; fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" "$stage/clang"
# Every shared library but the C/C++ runtime, which the device's own (newer) copies replace.
ldd "$extension" | awk '$3 ~ /^\// {print $3}' | while read -r library; do
  case "$(basename "$library")" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread*|libdl.so*) continue ;;
  esac
  cp -L "$library" "$stage/lib/"
done
resource=$(ls -d /usr/lib/llvm-14/lib/clang/*/ | head -1)
cp -r "$resource/include" "$stage/clang/include"
# Other targets' intrinsics headers (Arm, RISC-V, OpenCL, ...) are never included on x86-64 and would push the
# carried tree past the tool's 64 MiB.
rm -rf "$stage"/clang/include/{arm,riscv,hexagon,opencl,ppc,altivec,htm,s390,msa,vecintrin,wasm}*
echo "$(basename "$resource")" > "$stage/clang/version"
tar -C "$stage" -cf - . | xz -T2 -9e > .device/runtime.tar.xz
ls -la .device/runtime.tar.xz
