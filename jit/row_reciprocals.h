// Division by a per-row value becomes multiplication by its reciprocal, computed once per row: softmax divides
// every element by its row's sum, and a vector division costs about ten times a multiplication (it was a third
// of softmax's time here). PyTorch's softmax does the same; results may differ from true division in the last
// bit. Applied to a kernel's IR before rendering, for both backends.
#pragma once
#include "jit/kernel_ir.h"

namespace metajit {

void hoist_row_reciprocals(IrKernel& kernel);

}  // namespace metajit
