// The CPU as a Device (jit/run/run_loop.h): host memory from the caching allocator, kernels from the kernel cache
// run on the thread pool, library calls through oneDNN. It must not decide what runs or in which order: the
// run loop does.
#pragma once
#include <memory>

#include "jit/plan/contraction_matching.h"
#include "jit/run/run_loop.h"
#include "jit/toolchain/kernel_cache.h"

namespace metajit {

class CpuDevice : public Device {
 public:
  // For a run of `plan` on the CPU: its kernels are compiled or loaded before the first one runs, and the oneDNN
  // backend hears of the run's library calls for as long as the run lasts.
  explicit CpuDevice(const Plan& plan);
  // For the kernels a GPU plan runs on the host: each is compiled or loaded when it is first launched.
  CpuDevice() = default;

  StoragePtr allocate(size_t bytes) override;
  void* buffer(Storage& storage) override;
  void copy_to_device(void* device, const void* host, size_t bytes) override;
  void copy_to_host(void* host, const void* device, size_t bytes) override;
  bool launch_kernel(const PlannedKernel& kernel, const Node& output, const std::vector<void*>& buffers) override;
  void run_library_call(const LibraryCall& call, void* const* buffers) override;

 private:
  std::unique_ptr<LibraryRunScope> library_run_;
};

// The compiled host function of a kernel's `rendered` source (compiling it on a cache miss); errors name the node.
KernelFunction host_kernel_function(const PlannedKernel& kernel, const Node& output);

}  // namespace metajit
