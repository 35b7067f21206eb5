// Buffers: 64-byte aligned host blocks from a caching allocator, shared by refcount between a computed node and
// whatever still reads it (a numpy view, a kernel launch). Never knows what the bytes mean.
//
// A buffer may also live on a GPU. Its value is written once, when it is computed (by a CPU kernel into host
// memory, or by a GPU kernel into device memory), and never changed afterwards, so a copy made on the other side
// stays valid: data() downloads a device-computed value the first time the host reads it, device_data() uploads
// a host value the first time a GPU kernel reads it. Core knows no GPU API: the CUDA backend registers its memory
// as a DeviceMemory.
//
// Unified memory (Jittor's): because a host copy stays valid, a buffer's device copy can be dropped whenever the
// host holds the value (downloading it first), and device_data() brings it back. When a device allocation would
// pass the device memory limit (METAJIT_DEVICE_MEMORY_LIMIT, mj.flags.device_memory_limit), or the device itself
// is full, the device copies used least recently go to the host until the new one fits; those the current launch
// uses (stamped since the run loop's last begin_device_launch()) never do.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>

namespace metajit {

// A failed allocation (MemoryError in Python); what() says how many bytes, and the executor adds for which op
// and user line.
class AllocationError : public std::bad_alloc {
 public:
  explicit AllocationError(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// A GPU's memory, as the CUDA backend provides it. Copies are ordered after every kernel launched before them.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* allocate(size_t bytes) = 0;  // throws AllocationError
  virtual void release(void* block, size_t bytes) = 0;
  virtual void copy_to_host(void* host, const void* device, size_t bytes) = 0;  // returns when the bytes are there
  virtual void copy_to_device(void* device, const void* host, size_t bytes) = 0;  // `host` may be reused on return
};

// Registered once by the CUDA backend; null until then (no buffer can be on a device before it).
void set_device_memory(DeviceMemory* memory);
DeviceMemory* device_memory();

class Storage {
 public:
  explicit Storage(size_t bytes);   // host memory from the caching allocator, 64-byte aligned, uninitialised
  struct OnDevice {};
  Storage(size_t bytes, OnDevice);  // device memory only (a GPU kernel's output); host memory comes on demand
  ~Storage();                       // returns the blocks to their allocators' free lists
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // The value in host memory, downloaded first if only the device holds it.
  void* data() const {
    if (!host_valid_.load(std::memory_order_acquire)) download();
    return data_;
  }
  // The value in device memory, uploaded first if only the host holds it. Needs the registered DeviceMemory.
  void* device_data() const {
    if (!device_valid_.load(std::memory_order_acquire)) upload();
    mark_device_use();
    return device_data_;
  }
  bool on_host() const { return host_valid_.load(std::memory_order_acquire); }
  bool on_device() const { return device_valid_.load(std::memory_order_acquire); }
  size_t bytes() const { return bytes_; }
  // Moves the value off the device (downloading it if only the device has it); false when it holds no device copy
  // or another thread is copying it.
  bool evict_device_copy() const;

 private:
  void download() const;
  void upload() const;
  void* allocate_device_block() const;  // under the limit, evicting other buffers' device copies as needed
  void mark_device_use() const;

  mutable void* data_ = nullptr;
  mutable void* device_data_ = nullptr;
  size_t bytes_;
  mutable bool mapped_ = false;  // its own huge-page-aligned mapping (METAJIT_HUGE_PAGES=1), not a malloc block
  mutable std::atomic<bool> host_valid_{false};
  mutable std::atomic<bool> device_valid_{false};
  mutable std::atomic<uint64_t> last_device_use_{0};  // the launch that last used the device copy
  mutable std::mutex copy_mutex_;  // one copy at a time when two threads first read the other side together
};

using StoragePtr = std::shared_ptr<Storage>;

// Size classes shared by the host and device allocators: multiples of 64 bytes up to 4 KiB, then 8 steps per
// power of two (at most 12.5% waste), so a training loop's same shapes reuse the same blocks.
size_t allocation_size_class(size_t bytes);

// The device memory limit in bytes (0: none); METAJIT_DEVICE_MEMORY_LIMIT until set here.
int64_t device_memory_limit();
void set_device_memory_limit(int64_t bytes);
// Called by the run loop before each launch: device copies the coming launch uses from now on stay on the device
// until the next call.
void begin_device_launch();

// Drops every cached free host block back to the system (mj.gc()); the CUDA backend does the same for its own.
void release_cached_memory();

// Whether the program asked to save memory (mj.flags.memory_budget is set; meta_ops/recomputation.cc says so):
// caches that trade memory for time keep nothing then (oneDNN's layout copies kept for a later call,
// libraries/cpu/onednn_layout_cache.h).
bool saving_memory();
void set_saving_memory(bool saving);

// Called with a host buffer's bytes when the Storage holding them dies, before the block goes back to the
// allocator: a cache of values derived from a buffer and keyed by its address (oneDNN's reordered weights,
// libraries/cpu/onednn_layout_cache.h) forgets them there, so a later buffer at the same address is never taken for it.
// One hook, installed once at start-up; it must not destroy a Storage while holding a lock it takes itself.
using HostBufferFreedHook = void (*)(const void* address, size_t bytes);
void set_host_buffer_freed_hook(HostBufferFreedHook hook);

}  // namespace metajit
