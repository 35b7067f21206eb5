// The IR-to-IR passes between lowering and rendering, in the order they run: the one list of them, as
// jit/plan/planner.cc is of the planner's passes. Each pass has a file of its own saying what it decides and why.
// Under METAJIT_LOG=ir each pass's result is printed. Nothing here renders text or knows a graph node.
#pragma once
#include <cstdint>
#include <vector>

#include "jit/ir/kernel_ir.h"

namespace metajit {

// The passes every backend's kernel goes through (the C++ and the CUDA renderer both read the result):
//   reduce-loop merging   loops that walk memory as one become one loop (reduce_loop_merging.h)
void run_shared_passes(IrKernel& kernel);

// The passes of a kernel rendered to C++, after the shared ones, on the copy that is rendered:
//   launch offsets        constant read offsets move to the launch (launch_offsets.h)
//   running sums          cumsum's triangle and its gradient as scans (running_sums.h)
//   column sums           sums over outer dims walked a row at a time (column_sums.h)
//   transposed tiles      transposing kernels walked in square tiles (transposed_tiles.h)
//   parallel grain        the work range and the fewest items per thread (parallel_grain.h)
//   loop pieces           loops cut where guards and clamps change, a copy per piece (loop_pieces.h)
// Returns the launch offsets (move_constant_offsets_to_launch).
std::vector<int64_t> run_cpu_passes(IrKernel& kernel);

// The C++ scheduling passes alone (running sums to loop pieces), for a kernel that needs no launch offsets.
void run_cpu_scheduling_passes(IrKernel& kernel);

// Under METAJIT_LOG=ir: prints `kernel` as text, titled "IR after <pass>" (run_shared_passes prints the IR it
// is given as "IR after lowering"; each pass prints its result, or "unchanged").
void log_ir(const char* pass, const IrKernel& kernel);

}  // namespace metajit
