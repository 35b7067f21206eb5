// The JIT's implementation of core's GraphRunner: plan fused groups, lower, render, fetch kernels from the
// cache and launch them on the thread pool. Also the planning step on its own, for inspection.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/executor.h"
#include "jit/contraction.h"
#include "jit/cpp_renderer.h"
#include "jit/cuda_renderer.h"
#include "jit/kernel_cache.h"
#include "jit/lowering.h"
#include "meta_ops/code.h"

namespace metajit {

struct PlannedKernel {
  LoweredKernel lowered;
  RenderedKernel rendered;  // empty when a library call does all the work
  std::string key;          // of `rendered`
  // Per buffer of `rendered`, the elements its launch adds to the buffer's start (jit/launch_offsets.h); empty
  // when none. `lowered.kernel`, which the CUDA renderer reads, still has them in its index expressions.
  std::vector<int64_t> buffer_offsets;
  // A vendor-library call computing the kernel's contraction. With `rendered` set it writes a temporary that
  // the rendered epilogue reads as its last input buffer; otherwise it writes the output itself.
  std::shared_ptr<const LibraryCall> library;
  bool epilogue = false;    // with `library`: the lowered kernel is an epilogue reading the call's temporary
  std::string contraction;  // the matched contraction (Contraction::describe), also when no library took it
  bool code = false;        // a Code op: `rendered` is the user's kernel, launched once for all its outputs
  bool on_host = false;     // in plans for the GPU: a Code op without cuda_src, run on the CPU from `rendered`
  RenderedCudaKernel cuda;  // in plans for the GPU (jit/cuda_graph_runner.h), instead of `rendered`
  std::string cuda_key;     // of `cuda`, for the CUDA binary cache ("" under the emulator)
};

// The kernels that computing `targets` would launch, in launch order. Runs nothing. `backend` takes the
// contractions it can as library calls (oneDNN's for the CPU, cuBLAS/cuDNN's on a GPU); without one every
// contraction stays a generated kernel. Without `render_cpu_source` the kernels are lowered but not rendered to
// C++ (the CUDA backend renders its own). Without `multiple_outputs` every kernel stores one value
// (mj.cuda.emulate's per-node buffers need that).
std::vector<PlannedKernel> plan_kernels(const std::vector<NodePtr>& targets,
                                        ContractionBackend backend = contraction_backend(),
                                        bool render_cpu_source = true, bool multiple_outputs = true);

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
