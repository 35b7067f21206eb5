// The JIT's implementation of core's GraphRunner: takes a plan (jit/plan/planner.h) from the plan cache or the
// planner and runs it through the run loop (jit/run/run_loop.h) on the CPU, or hands the sync to the CUDA runner
// (jit/run/cuda_graph_runner.h) while kernels run on a GPU or its emulator.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/executor.h"
#include "jit/codegen/cpp/cpp_renderer.h"
#include "jit/codegen/cuda/cuda_renderer.h"
#include "jit/ir/lowering.h"
#include "jit/plan/contraction_matching.h"
#include "jit/plan/planner.h"
#include "jit/run/cuda_graph_runner.h"
#include "jit/run/kernel_profile.h"
#include "jit/run/non_finite_check.h"
#include "jit/toolchain/kernel_cache.h"
#include "meta_ops/code.h"

namespace metajit {

// Registers the JIT as core's graph runner (idempotent).
void install_graph_executor();

// The plan a sync ran and the graph signature it ran it against, kept for mj.trace (trace/traced_function.h).
struct CapturedRun {
  GraphSignature signature;
  std::shared_ptr<const Plan> plan;
  CudaExecution where = CudaExecution::Off;  // the devices it ran on: the CPU, a GPU or the CUDA emulator
};
// While set, each sync on the calling thread fills `capture` (the last one wins); null stops.
void capture_runs(CapturedRun* capture);
// The calling thread's capture, or null (the CUDA runner fills it too).
CapturedRun* active_capture();
// Runs a captured plan again on `nodes` (fresh nodes laid out as its signature's), on the devices it ran on
// then, with `releasable` saying which buffers may go after their last reader (jit/run/run_loop.h).
void run_captured(const CapturedRun& run, const std::vector<NodePtr>& nodes, const std::vector<uint8_t>& releasable);

}  // namespace metajit
