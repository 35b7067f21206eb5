// The GPU as metajit uses it: the first device's primary context, one stream that every copy and launch goes
// on (so work runs in the order it was issued, and a freed block is only reused by work issued after it), a
// caching allocator for device memory, and the modules loaded from CUBINs. Created on first use; needs the
// driver (CudaDriver), so it exists only on a machine with a GPU.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/storage.h"
#include "jit/run/cuda_driver.h"
#include "jit/toolchain/nvrtc_compiler.h"

namespace metajit {

class CudaContext : public DeviceMemory {
 public:
  // The process's context on device 0; throws CudaUnavailableError when there is no usable GPU.
  static CudaContext& instance();

  const CudaDevice& device() const { return device_; }
  CudaTarget target() const;  // what kernels are compiled for: the device's architecture

  // DeviceMemory: blocks come from per-size-class free lists; a block the driver cannot give is retried once
  // after the free lists are emptied, then AllocationError names the bytes asked for and what the GPU has.
  void* allocate(size_t bytes) override;
  void release(void* block, size_t bytes) override;
  void copy_to_host(void* host, const void* device, size_t bytes) override;
  void copy_to_device(void* device, const void* host, size_t bytes) override;
  void release_cached_blocks();  // mj.gc(): every cached free block back to the driver
  int64_t cached_bytes() const;

  // The entry `entry` of the module loaded from `key`'s binary, or null when that module is not loaded yet.
  void* loaded_function(const std::string& key, const std::string& entry);
  // Loads `binary` (CUBIN, or PTX the driver compiles) as `key`'s module and returns `entry` from it.
  void* load_function(const std::string& key, const CudaBinary& binary, const std::string& entry);
  // Makes the next launches look their kernels up in the binary cache again (clearing the in-memory caches).
  void forget_functions();
  // Queues a launch of `blocks` blocks of `threads` threads with one pointer argument per buffer.
  void launch(void* function, int64_t blocks, int threads, const std::vector<void*>& buffers);
  void synchronize();  // waits for everything queued; a kernel's fault surfaces here as an error
  // The stream every launch goes on (for cuBLAS and cuDNN handles), with the context current on this thread.
  void* stream();
  // Queues setting `bytes` bytes at `device` to zero.
  void zero(void* device, size_t bytes);

  // Throws std::runtime_error "what: CUDA_ERROR_... (text)" unless status is CUDA_SUCCESS.
  void check(int status, const char* what) const;

 private:
  CudaContext();
  void make_current() const;  // the driver's current context is per thread

  const CudaDriver::Api& api_;
  const CudaDriver& driver_;
  CudaDevice device_;
  void* context_ = nullptr;
  void* stream_ = nullptr;

  mutable std::mutex memory_mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;  // by size class
  int64_t cached_bytes_ = 0;

  std::mutex module_mutex_;
  std::unordered_map<std::string, void*> modules_;    // by binary key
  std::unordered_map<std::string, void*> functions_;  // by key + "/" + entry
};

}  // namespace metajit
