// Scheduling pass: running sums. cumsum and cumprod arrive as a triangle (reindex to [..., n, R] with the terms
// past the element's own index reading the identity, then a sum over r), and their gradient as a scatter into
// every target at or below the source index. Computed as written that is up to n terms per element; computed as
// a scan it is one. This pass recognises the three shapes and records the form in kernel.schedule; the C++
// renderer writes the scan. It does not rewrite statements, and it leaves kernels of other shapes alone.
#pragma once
#include "jit/ir/kernel_ir.h"

namespace metajit {

// Sets kernel.schedule.form (and .statement, and .tile for a column scan) when, in a Pointwise kernel, the first
// statement is a running sum along the last dim (RunningSum) or along dim rank-2 (ColumnRunningSum), or, in a
// Scatter, the last statement accumulates a running sum's gradient (ReverseRunningSum).
void choose_running_sums(IrKernel& kernel);

}  // namespace metajit
