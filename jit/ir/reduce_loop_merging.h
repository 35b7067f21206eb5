// Reduction loops that walk memory as one become one loop: summing an NCHW tensor over (H, W) reads each
// (n, c) plane contiguously, yet as nested loops of W iterations the inner loop is short (8 on an 8x8 map),
// vectorises poorly and pays a horizontal sum per row. Applied to a kernel's IR after library matching (which
// reads the original loop structure) and before rendering, for both backends.
#pragma once
#include "jit/ir/kernel_ir.h"

namespace metajit {

// Merges each pair of adjacent loops (outer over A, inner over B) of every reduction whose indices all use
// them as outer * B + inner, into one loop over A * B. Loops used any other way are left as they are.
void merge_reduce_loops(IrKernel& kernel);

}  // namespace metajit
