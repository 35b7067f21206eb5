// The name of the entry point every rendered kernel defines (C++ kernels, Code op kernels, the CUDA emulator's
// wrapper) and the toolchain looks up in a loaded object. It lives below both, so the kernel cache can name it
// without depending on a renderer.
#pragma once

namespace metajit {

extern const char* const kKernelSymbol;  // "metajit_kernel"

}  // namespace metajit
