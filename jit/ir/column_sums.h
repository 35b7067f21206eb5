// Scheduling pass: column sums. A sum over outer dims (a bias gradient: the sum over batch and sequence of
// [N, L, C]) computed one output element at a time strides through memory, a cache line per term, each line
// fetched again for each of its columns. Walked with the sum's loops outside and a tile of columns accumulated
// side by side inside, each input row is read once, contiguously. This pass recognises such kernels and records
// the form in kernel.schedule; the C++ renderer writes the loops. Every column still adds its terms in loop
// order, so results do not change. It does not rewrite statements.
#pragma once
#include "jit/ir/kernel_ir.h"

namespace metajit {

// Sets kernel.schedule to ColumnSum (.statement the sum, .tile the columns per tile) when a Pointwise kernel of
// rank >= 1 without a row body and not already given a form is a column sum (column_sums.cc says what that is).
void choose_column_sums(IrKernel& kernel);

}  // namespace metajit
