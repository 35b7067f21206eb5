// The planner: which kernels computing some pending values takes, as a list of PlannedKernels in launch order.
// Each kernel is a fused group of nodes lowered to IR, rendered and keyed for the kernel cache, or a library call
// (with an optional generated epilogue), or a user's Code op. Planning runs nothing and compiles nothing; the
// passes it is made of are listed in planner.cc, each in a file of its own.
#pragma once
#include <vector>

#include "core/node.h"
#include "jit/plan/contraction_matching.h"
#include "jit/plan/plan.h"

namespace metajit {

// The kernels that computing `targets` would launch, in launch order. Runs nothing. `backend` takes the
// contractions it can as library calls (oneDNN's for the CPU, cuBLAS/cuDNN's on a GPU); without one every
// contraction stays a generated kernel. Without `render_cpu_source` the kernels are lowered but not rendered to
// C++ (the CUDA backend renders its own). Without `multiple_outputs` every kernel stores one value
// (mj.cuda.emulate plans so, which keeps the CUDA sources it emulates the same as before the run loop took it).
std::vector<PlannedKernel> plan_kernels(const std::vector<NodePtr>& targets,
                                        ContractionBackend backend = contraction_backend(),
                                        bool render_cpu_source = true, bool multiple_outputs = true);

}  // namespace metajit
