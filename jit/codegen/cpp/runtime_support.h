// The runtime support object: out-of-line helpers that generated C++ kernels call by name instead of compiling
// a copy each (today the full-range vector exp of CPUs without AVX-512, a third of a small exp kernel's compile
// time). It is itself a kernel source, so the kernel cache fetches it like any kernel (memory, bundle, disk,
// compiler, with the kernels' flags and key) and bundles carry it; its metajit_kernel fills buffers[0], a table
// of void*, with the helpers' addresses in `symbols` order (null for a helper this target does not need).
#pragma once
#include <string>
#include <vector>

namespace metajit {

struct RuntimeSupport {
  std::string source;
  std::vector<std::string> symbols;
};

const RuntimeSupport& cpp_runtime_support();

}  // namespace metajit
