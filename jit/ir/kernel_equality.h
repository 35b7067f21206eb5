// Whether two kernels are the same in every field of their IR, and a hash that agrees: a plan's kernels that are
// equal render to the same source, so the planner renders one of them and reuses it (jit/plan/render_kernels.cc).
// Stricter than ir_equal, which leaves out what ir_key leaves out (loop extents, let ranges): a renderer reads those.
#pragma once
#include <cstdint>

#include "jit/ir/kernel_ir.h"

namespace metajit {

uint64_t ir_kernel_hash(const IrKernel& kernel);
bool ir_kernels_equal(const IrKernel& first, const IrKernel& second);

}  // namespace metajit
