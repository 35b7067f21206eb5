// The CPU emulator of CUDA kernels as a Device (jit/run/run_loop.h): a plan's CUDA kernels run through
// jit/run/cuda_emulator.h, so machines without a GPU (CI) run everything the GPU runs but the driver calls.
// It serves two callers: mj.flags.use_cuda = "emulator" (values in the emulated device memory, so host/device
// copies are real copies) and mj.cuda.emulate (plain host memory, zero-filled, so a process that runs on the CPU
// stays on its own memory). It has no library calls: plans for it leave every contraction to a kernel.
#pragma once
#include <cstdint>

#include "jit/run/cpu_device.h"
#include "jit/run/run_loop.h"

namespace metajit {

class CudaEmulatorDevice : public Device {
 public:
  enum class Memory { EmulatedDevice, Host };
  // Each launch gets at most `max_blocks` blocks, so the kernels' grid-stride loops run more than once.
  CudaEmulatorDevice(Memory memory, int64_t max_blocks) : memory_(memory), max_blocks_(max_blocks) {}

  StoragePtr allocate(size_t bytes) override;
  void* buffer(Storage& storage) override;
  void copy_to_device(void* device, const void* host, size_t bytes) override;
  void copy_to_host(void* host, const void* device, size_t bytes) override;
  bool launch_kernel(const PlannedKernel& kernel, const Node& output, const std::vector<void*>& buffers) override;
  void run_library_call(const LibraryCall& call, void* const* buffers) override;
  Device& host() override { return host_; }

 private:
  Memory memory_;
  int64_t max_blocks_;
  CpuDevice host_;  // a Code op without cuda_src runs its C++ source there
};

}  // namespace metajit
