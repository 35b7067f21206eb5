#include "jit/run/cuda_context.h"

#include <stdexcept>

#include "core/stats.h"

namespace metajit {
namespace {

constexpr int kOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
constexpr size_t kDeviceAlignment = 256;  // what cuMemAlloc guarantees; size classes keep it for small blocks

uint64_t address_of(const void* pointer) { return reinterpret_cast<uint64_t>(pointer); }

}  // namespace

CudaContext& CudaContext::instance() {
  static CudaContext* context = new CudaContext();  // lives for the process: storages may outlive statics
  return *context;
}

CudaContext::CudaContext() : api_(CudaDriver::instance().api()), driver_(CudaDriver::instance()) {
  device_ = driver_.devices().front();
  int handle = 0;
  check(api_.device_get(&handle, device_.index), "cuDeviceGet");
  check(api_.primary_context_retain(&context_, handle), "cuDevicePrimaryCtxRetain");
  make_current();
  check(api_.stream_create(&stream_, 0), "cuStreamCreate");
}

CudaTarget CudaContext::target() const {
  CudaTarget target;
  target.architecture = device_.architecture;
  return target;
}

void CudaContext::make_current() const {
  thread_local void* current = nullptr;
  if (current == context_) return;
  check(api_.context_set_current(context_), "cuCtxSetCurrent");
  current = context_;
}

void CudaContext::check(int status, const char* what) const {
  if (status != 0) throw std::runtime_error(std::string("CUDA: ") + what + " failed: " + driver_.describe(status));
}

void* CudaContext::allocate(size_t bytes) {
  size_t rounded = allocation_size_class(std::max(bytes, kDeviceAlignment));
  {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    auto found = free_blocks_.find(rounded);
    if (found != free_blocks_.end() && !found->second.empty()) {
      void* block = found->second.back();
      found->second.pop_back();
      cached_bytes_ -= int64_t(rounded);
      stats().device_bytes_cached -= int64_t(rounded);
      add_device_bytes_allocated(int64_t(rounded));
      return block;
    }
  }
  make_current();
  uint64_t address = 0;
  int status = api_.memory_allocate(&address, rounded);
  if (status == kOutOfMemory) {  // the cache may hold enough in other size classes
    release_cached_blocks();
    status = api_.memory_allocate(&address, rounded);
  }
  if (status == kOutOfMemory) {
    size_t free = 0, total = 0;
    api_.memory_information(&free, &total);
    throw AllocationError("cannot allocate " + std::to_string(bytes) + " bytes on the GPU (" + device_.name + ": " +
                          std::to_string(free >> 20) + " MiB free of " + std::to_string(total >> 20) + " MiB; " +
                          std::to_string(int64_t(stats().device_bytes_allocated.load())) +
                          " bytes in use by metajit, " +
                          std::to_string(int64_t(stats().device_bytes_cached.load())) + " cached)");
  }
  check(status, "cuMemAlloc");
  add_device_bytes_allocated(int64_t(rounded));
  return reinterpret_cast<void*>(address);
}

void CudaContext::release(void* block, size_t bytes) {
  // Work already queued may still read the block; anything that reuses it is queued after that work.
  size_t rounded = allocation_size_class(std::max(bytes, kDeviceAlignment));
  std::lock_guard<std::mutex> lock(memory_mutex_);
  free_blocks_[rounded].push_back(block);
  cached_bytes_ += int64_t(rounded);
  add_device_bytes_allocated(-int64_t(rounded));
  stats().device_bytes_cached += int64_t(rounded);
}

void CudaContext::release_cached_blocks() {
  make_current();
  std::lock_guard<std::mutex> lock(memory_mutex_);
  if (free_blocks_.empty()) return;
  check(api_.stream_synchronize(stream_), "cuStreamSynchronize");
  for (auto& [rounded, blocks] : free_blocks_)
    for (void* block : blocks) api_.memory_free(address_of(block));
  free_blocks_.clear();
  stats().device_bytes_cached -= cached_bytes_;
  cached_bytes_ = 0;
}

int64_t CudaContext::cached_bytes() const {
  std::lock_guard<std::mutex> lock(memory_mutex_);
  return cached_bytes_;
}

void CudaContext::copy_to_host(void* host, const void* device, size_t bytes) {
  make_current();
  check(api_.copy_device_to_host(host, address_of(device), bytes, stream_), "cuMemcpyDtoHAsync");
  check(api_.stream_synchronize(stream_), "cuStreamSynchronize (a kernel before this copy failed)");
}

void CudaContext::copy_to_device(void* device, const void* host, size_t bytes) {
  // From pageable memory the driver has staged the bytes when this returns, so `host` may be freed.
  make_current();
  check(api_.copy_host_to_device(address_of(device), host, bytes, stream_), "cuMemcpyHtoDAsync");
}

void* CudaContext::loaded_function(const std::string& key, const std::string& entry) {
  std::lock_guard<std::mutex> lock(module_mutex_);
  auto found = functions_.find(key + "/" + entry);
  return found == functions_.end() ? nullptr : found->second;
}

void CudaContext::forget_functions() {
  std::lock_guard<std::mutex> lock(module_mutex_);
  functions_.clear();  // loaded modules stay: load_function finds them again by key
}

void* CudaContext::load_function(const std::string& key, const CudaBinary& binary, const std::string& entry) {
  make_current();
  std::lock_guard<std::mutex> lock(module_mutex_);
  void*& module = modules_[key];
  if (!module) {
    int status = api_.module_load_data(&module, binary.bytes.c_str());  // PTX text is NUL-terminated by c_str()
    if (status) {
      module = nullptr;
      check(status, ("cuModuleLoadData of a " + binary.architecture + (binary.is_ptx ? " PTX" : " CUBIN") +
                     " kernel on " + device_.name).c_str());
    }
  }
  void*& function = functions_[key + "/" + entry];
  if (!function) check(api_.module_get_function(&function, module, entry.c_str()), "cuModuleGetFunction");
  return function;
}

void* CudaContext::stream() {
  make_current();
  return stream_;
}

void CudaContext::zero(void* device, size_t bytes) {
  make_current();
  if (!api_.memset_async) throw std::runtime_error("CUDA: this driver has no cuMemsetD8Async");
  check(api_.memset_async(address_of(device), 0, bytes, stream_), "cuMemsetD8Async");
}

void CudaContext::launch(void* function, int64_t blocks, int threads, const std::vector<void*>& buffers) {
  make_current();
  std::vector<uint64_t> addresses;
  addresses.reserve(buffers.size());
  for (void* buffer : buffers) addresses.push_back(address_of(buffer));
  std::vector<void*> parameters;  // cuLaunchKernel takes a pointer to each argument's value
  parameters.reserve(addresses.size());
  for (uint64_t& address : addresses) parameters.push_back(&address);
  check(api_.launch_kernel(function, unsigned(blocks), 1, 1, unsigned(threads), 1, 1, 0, stream_, parameters.data(),
                           nullptr),
        "cuLaunchKernel");
}

void CudaContext::synchronize() {
  make_current();
  check(api_.stream_synchronize(stream_), "cuStreamSynchronize (a kernel failed)");
}

}  // namespace metajit
