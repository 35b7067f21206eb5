// Renders an IrKernel to C++ source for the in-process Clang backend. The kernel is an extern "C" function
// `metajit_kernel(void* const* buffers, int64_t begin, int64_t end)` that processes the slice [begin, end) of
// its work range (flat output elements, or rows for a split scatter). Pure text generation: no compiling.
#pragma once
#include <string>

#include "jit/ir/kernel_ir.h"

namespace metajit {

struct RenderedKernel {
  std::string header_comment;  // fused ops and user lines: for humans, not part of the cache key
  std::string source;          // prelude + kernel: compiled and hashed
  int64_t work_items = 0;      // size of the range the launcher splits over threads
  int64_t grain = 1;           // minimum items per thread
};

RenderedKernel render_cpp(const IrKernel& kernel);

}  // namespace metajit
