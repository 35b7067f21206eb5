// The GPU as a Device (jit/run/run_loop.h): device memory from the CUDA context's caching allocator, kernels
// loaded from the CUDA binary cache and queued on the context's one stream, cuBLAS and cuDNN calls on that
// stream. As on the CPU (jit/plan/buffer_lifetimes.h), an intermediate goes back to the allocator after its last
// reader is queued; the one stream runs whatever reuses the block after that reader. It must not decide what
// runs or in which order: the run loop does.
#pragma once
#include "jit/run/cpu_device.h"
#include "jit/run/run_loop.h"

namespace metajit {

class CudaStreamDevice : public Device {
 public:
  StoragePtr allocate(size_t bytes) override;
  void* buffer(Storage& storage) override;
  void copy_to_device(void* device, const void* host, size_t bytes) override;
  void copy_to_host(void* host, const void* device, size_t bytes) override;
  bool launch_kernel(const PlannedKernel& kernel, const Node& output, const std::vector<void*>& buffers) override;
  void run_library_call(const LibraryCall& call, void* const* buffers) override;
  void synchronize() override;
  Device& host() override { return host_; }

 private:
  CpuDevice host_;  // a Code op without cuda_src runs its C++ source there
};

}  // namespace metajit
