// Scheduling pass: the parallel split. A C++ kernel processes a slice [begin, end) of a work range that the run
// loop splits over the thread pool; this pass decides what the range counts (elements, rows, tiles or column
// tiles, by the form the earlier passes chose) and the grain, the fewest items one thread takes, so that a slice
// is worth a thread's wake-up. It runs after the form passes and only writes kernel.schedule.work_items and
// .grain.
#pragma once
#include "jit/ir/kernel_ir.h"

namespace metajit {

void choose_parallel_grain(IrKernel& kernel);

}  // namespace metajit
