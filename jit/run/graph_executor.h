// The JIT's implementation of core's GraphRunner: takes a plan (jit/plan/planner.h) from the plan cache or the
// planner, fetches its kernels from the kernel cache and launches them on the thread pool.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/executor.h"
#include "jit/codegen/cpp/cpp_renderer.h"
#include "jit/codegen/cuda/cuda_renderer.h"
#include "jit/ir/lowering.h"
#include "jit/plan/contraction.h"
#include "jit/plan/planner.h"
#include "jit/toolchain/kernel_cache.h"
#include "meta_ops/code.h"

namespace metajit {

// Shared with the CUDA graph runner: the METAJIT_CHECK_NAN check of one kernel's output, whether profiling is
// on, and recording one kernel's time.
void check_kernel_output(const PlannedKernel& kernel, const Node& output, const std::vector<NodePtr>& inputs);
bool kernel_profiling();
void record_kernel_profile(const PlannedKernel& kernel, const Node& output, double seconds);

// The compiled host function of a kernel's `rendered` source (compiling it on a cache miss); errors name the
// node. And running a Code op's host function: the CUDA runner uses both for Code ops without cuda_src.
KernelFunction host_kernel_function(const PlannedKernel& kernel, const Node& output);
void run_code_on_host(const NodePtr& output, const std::vector<NodePtr>& inputs, KernelFunction function,
                      int64_t work_items);
// A kernel's result storage, in host or device memory; a failed allocation names the node and the user's line.
StoragePtr allocate_result(const Node& output, DType dtype, const Shape& shape, bool on_device);
// The start of a Code op's launch in either runner: fresh storages for all its outputs and the kernel's buffers
// (outputs, then inputs), on the device or the host. `payload` stays null when a sibling output's launch
// earlier in the plan already computed `output`.
struct CodeLaunch {
  const CodePayload* payload = nullptr;
  std::vector<StoragePtr> storages;
  std::vector<void*> buffers;
};
CodeLaunch begin_code_launch(const NodePtr& output, const std::vector<NodePtr>& inputs, bool on_device);
// Shared by both runners' Code op launches: the data names an error lists ("none" without data), and
// publishing every live output of the op once it ran (`storages` in output order).
std::string code_data_names(const CodeOp& op);
void publish_code_outputs(const CodePayload& payload, const NodePtr& output, const std::vector<StoragePtr>& storages);

// Per-kernel wall time, collected while profiling is on (mj.profile()): one entry per distinct kernel.
struct KernelProfile {
  std::string name;     // the library call, or the kernel's root op, shape and user line
  std::string key;      // cache key ("" for a library call alone)
  int64_t launches = 0;
  double seconds = 0;
};
void set_kernel_profiling(bool enabled);

// METAJIT_CHECK_NAN=1 / mj.flags.check_nan: after every kernel, library call and Code op, scan its floating
// output; a NaN or infinity raises NonFiniteError naming the op, its user line and the ops fused into it.
struct NonFiniteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
void set_check_non_finite(bool enabled);
bool check_non_finite();
std::vector<KernelProfile> kernel_profile();  // sorted by total time, largest first
void reset_kernel_profile();

// Registers the JIT as core's graph runner (idempotent).
void install_graph_executor();

}  // namespace metajit
