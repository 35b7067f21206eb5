#include "jit/run/cuda_emulator_device.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "jit/run/cuda_emulator.h"

namespace metajit {

StoragePtr CudaEmulatorDevice::allocate(size_t bytes) {
  if (memory_ == Memory::EmulatedDevice) return std::make_shared<Storage>(bytes, Storage::OnDevice{});
  auto storage = std::make_shared<Storage>(bytes);
  if (bytes > 0) std::memset(storage->data(), 0, bytes);  // what a kernel leaves unwritten reads the same each run
  return storage;
}

void* CudaEmulatorDevice::buffer(Storage& storage) {
  return memory_ == Memory::EmulatedDevice ? storage.device_data() : storage.data();
}

// Both memories are host memory: the emulated device's blocks are only ever touched by emulated kernels.
void CudaEmulatorDevice::copy_to_device(void* device, const void* host, size_t bytes) {
  std::memcpy(device, host, bytes);
}

void CudaEmulatorDevice::copy_to_host(void* host, const void* device, size_t bytes) {
  std::memcpy(host, device, bytes);
}

bool CudaEmulatorDevice::launch_kernel(const PlannedKernel& kernel, const Node& output,
                                       const std::vector<void*>& buffers) {
  try {
    emulate_cuda_kernel(kernel.cuda, buffers, max_blocks_);
  } catch (const MissingKernelError& error) {
    throw MissingKernelError(std::string(error.what()) + "; it computes " + output.op_name() + " " +
                             shape_to_string(output.shape) + " created at " + output.provenance.to_string());
  }
  for (const CudaLaunch& launch : kernel.cuda.launches)
    if (launch.work_items > 0) return true;
  return false;
}

void CudaEmulatorDevice::run_library_call(const LibraryCall& call, void* const*) {
  throw std::logic_error("internal error: the CUDA emulator was given a library call (" + call.describe() + ")");
}

}  // namespace metajit
