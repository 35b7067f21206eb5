// Caching allocator: blocks are rounded up to a size class and kept on a per-class free list when released,
// so a training loop that allocates the same shapes every step stops calling the system allocator.
// With METAJIT_HUGE_PAGES=1, blocks of 2 MiB and more are mapped on their own, 2 MiB aligned and marked for
// transparent huge pages: streaming kernels over large tensors get about 3% faster, but first touching a huge
// page is slower here, so a cold first training step took 1.5 s longer; hence opt-in (docs/design.md, "Memory").
#include "core/storage.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/stats.h"
#include "core/flags.h"

namespace metajit {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kMaxCachedBytes = size_t(4) << 30;  // beyond this, freed blocks go straight back to the system
constexpr size_t kHugePageBytes = size_t(2) << 20;

// Read at each large allocation (cheap next to one): each block remembers how it was made.
bool huge_pages_requested() { return flag_boolean(Flag::HugePages); }

size_t whole_pages(size_t bytes) {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

// A fresh mapping with its start on a 2 MiB boundary: map 2 MiB more than needed, then unmap the unaligned head
// and whatever lies past the block, so only 2 MiB ranges the block covers whole can become huge pages (a tail
// shorter than that stays in small pages and costs no memory beyond the block).
void* map_aligned_block(size_t rounded) {
  size_t length = whole_pages(rounded);
  size_t span = length + kHugePageBytes;
  void* mapped = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  uintptr_t raw = reinterpret_cast<uintptr_t>(mapped);
  uintptr_t start = (raw + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (start > raw) munmap(mapped, start - raw);
  if (raw + span > start + length) munmap(reinterpret_cast<void*>(start + length), raw + span - (start + length));
  madvise(reinterpret_cast<void*>(start), length, MADV_HUGEPAGE);  // a hint: without THP the block still works
  return reinterpret_cast<void*>(start);
}

void* allocate_block(size_t rounded, bool mapped) {
  return mapped ? map_aligned_block(rounded) : std::aligned_alloc(kAlignment, rounded);
}

void free_block(void* block, size_t rounded, bool mapped) {
  if (mapped)
    munmap(block, whole_pages(rounded));
  else
    std::free(block);
}

struct FreeLists {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> blocks_by_class[2];  // [0]: from malloc, [1]: own mappings
  size_t cached_bytes = 0;
};

FreeLists& free_lists() {
  static FreeLists* lists = new FreeLists();  // leaked on purpose: Storage may die during static destruction
  return *lists;
}

std::atomic<DeviceMemory*> registered_device_memory{nullptr};
std::atomic<HostBufferFreedHook> host_buffer_freed_hook{nullptr};

void note_allocated(size_t rounded) { add_bytes_allocated(int64_t(rounded)); }

void* take_host_block(size_t bytes, bool mapped) {
  size_t rounded = allocation_size_class(bytes == 0 ? 1 : bytes);
  FreeLists& lists = free_lists();
  {
    std::lock_guard<std::mutex> lock(lists.mutex);
    auto& blocks_by_class = lists.blocks_by_class[mapped];
    auto found = blocks_by_class.find(rounded);
    if (found != blocks_by_class.end() && !found->second.empty()) {
      void* block = found->second.back();
      found->second.pop_back();
      lists.cached_bytes -= rounded;
      stats().bytes_cached -= rounded;
      note_allocated(rounded);
      return block;
    }
  }
  void* block = allocate_block(rounded, mapped);
  if (!block)
    throw AllocationError("cannot allocate " + std::to_string(bytes) + " bytes (" +
                          std::to_string(int64_t(stats().bytes_allocated.load())) + " bytes in use by metajit, " +
                          std::to_string(int64_t(stats().bytes_cached.load())) + " cached)");
  note_allocated(rounded);
  return block;
}

void give_back_host_block(void* block, size_t bytes, bool mapped) {
  size_t rounded = allocation_size_class(bytes == 0 ? 1 : bytes);
  stats().bytes_allocated -= rounded;
  FreeLists& lists = free_lists();
  std::lock_guard<std::mutex> lock(lists.mutex);
  if (lists.cached_bytes + rounded > kMaxCachedBytes) {
    free_block(block, rounded, mapped);
    return;
  }
  lists.blocks_by_class[mapped][rounded].push_back(block);
  lists.cached_bytes += rounded;
  stats().bytes_cached += rounded;
}

// Every Storage holding a device copy, for eviction. Storages register when they take a device block and leave
// when they give it up; eviction runs under this lock, so none is destroyed meanwhile (a destructor waits here).
std::mutex device_holders_mutex;
std::vector<const Storage*>& device_holders() {
  static std::vector<const Storage*> holders;
  return holders;
}
void add_device_holder(const Storage* storage) {
  std::lock_guard<std::mutex> lock(device_holders_mutex);
  device_holders().push_back(storage);
}
void remove_device_holder(const Storage* storage) {
  std::lock_guard<std::mutex> lock(device_holders_mutex);
  auto& holders = device_holders();
  for (size_t index = 0; index < holders.size(); ++index)
    if (holders[index] == storage) {
      holders[index] = holders.back();
      holders.pop_back();
      return;
    }
}

std::atomic<uint64_t> device_launch{1};
std::atomic<int64_t> device_memory_limit_bytes{-1};  // -1: not read from the environment yet

DeviceMemory& required_device_memory() {
  DeviceMemory* memory = registered_device_memory.load(std::memory_order_acquire);
  if (!memory) throw std::logic_error("internal error: a buffer needs device memory but no GPU backend is running");
  return *memory;
}

}  // namespace

size_t allocation_size_class(size_t bytes) {
  if (bytes <= 4096) return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  size_t power = size_t(1) << (63 - __builtin_clzll(bytes - 1));
  size_t step = power / 8;
  return (bytes + step - 1) / step * step;
}

void set_host_buffer_freed_hook(HostBufferFreedHook hook) { host_buffer_freed_hook.store(hook, std::memory_order_release); }

void set_device_memory(DeviceMemory* memory) { registered_device_memory.store(memory, std::memory_order_release); }
DeviceMemory* device_memory() { return registered_device_memory.load(std::memory_order_acquire); }

Storage::Storage(size_t bytes) : bytes_(bytes) {
  mapped_ = allocation_size_class(bytes == 0 ? 1 : bytes) >= kHugePageBytes && huge_pages_requested();
  data_ = take_host_block(bytes, mapped_);
  host_valid_.store(true, std::memory_order_relaxed);
}

Storage::Storage(size_t bytes, OnDevice) : bytes_(bytes) {
  device_data_ = allocate_device_block();
  mark_device_use();
  device_valid_.store(true, std::memory_order_relaxed);
  add_device_holder(this);
}

Storage::~Storage() {
  if (data_) {
    if (HostBufferFreedHook hook = host_buffer_freed_hook.load(std::memory_order_acquire)) hook(data_, bytes_);
    give_back_host_block(data_, bytes_, mapped_);
  }
  if (device_data_) {
    remove_device_holder(this);
    required_device_memory().release(device_data_, bytes_);
  }
}

int64_t device_memory_limit() {
  int64_t limit = device_memory_limit_bytes.load(std::memory_order_relaxed);
  if (limit < 0) {
    limit = std::max<int64_t>(flag_integer(Flag::DeviceMemoryLimit).value_or(0), 0);
    device_memory_limit_bytes.store(limit, std::memory_order_relaxed);
  }
  return limit;
}

void set_device_memory_limit(int64_t bytes) { device_memory_limit_bytes.store(std::max<int64_t>(bytes, 0)); }

void begin_device_launch() { device_launch.fetch_add(1, std::memory_order_relaxed); }

namespace {
std::atomic<bool> saving_memory_now{false};
}  // namespace

bool saving_memory() { return saving_memory_now.load(std::memory_order_relaxed); }

void set_saving_memory(bool saving) { saving_memory_now.store(saving, std::memory_order_relaxed); }

void Storage::mark_device_use() const {
  last_device_use_.store(device_launch.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

bool Storage::evict_device_copy() const {
  std::unique_lock<std::mutex> lock(copy_mutex_, std::try_to_lock);
  if (!lock.owns_lock() || !device_data_) return false;
  if (!host_valid_.load(std::memory_order_relaxed)) {
    if (!data_) {
      mapped_ = allocation_size_class(bytes_ == 0 ? 1 : bytes_) >= kHugePageBytes && huge_pages_requested();
      data_ = take_host_block(bytes_, mapped_);
    }
    if (bytes_) required_device_memory().copy_to_host(data_, device_data_, bytes_);
    host_valid_.store(true, std::memory_order_release);
  }
  device_valid_.store(false, std::memory_order_release);
  required_device_memory().release(device_data_, bytes_);
  device_data_ = nullptr;
  stats().device_evictions++;
  return true;
}

// A device block for this buffer. Under the limit (or after the device refused), device copies no current launch
// uses go to the host, least recently used first, until the block fits; this buffer is not registered yet.
void* Storage::allocate_device_block() const {
  DeviceMemory& memory = required_device_memory();
  int64_t limit = device_memory_limit();
  int64_t rounded = int64_t(allocation_size_class(std::max<size_t>(bytes_, 256)));
  auto fits = [&] { return limit == 0 || stats().device_bytes_allocated.load() + rounded <= limit; };
  auto evict_until = [&](const std::function<bool()>& done) {
    std::lock_guard<std::mutex> lock(device_holders_mutex);
    std::vector<const Storage*> candidates;
    uint64_t now = device_launch.load(std::memory_order_relaxed);
    for (const Storage* holder : device_holders())
      if (holder->last_device_use_.load(std::memory_order_relaxed) < now) candidates.push_back(holder);
    std::sort(candidates.begin(), candidates.end(), [](const Storage* a, const Storage* b) {
      return a->last_device_use_.load(std::memory_order_relaxed) < b->last_device_use_.load(std::memory_order_relaxed);
    });
    for (const Storage* candidate : candidates) {
      if (done()) return;
      if (!candidate->evict_device_copy()) continue;
      auto& holders = device_holders();
      holders.erase(std::find(holders.begin(), holders.end(), candidate));
    }
  };
  if (!fits()) evict_until(fits);
  if (!fits())
    throw AllocationError("cannot allocate " + std::to_string(bytes_) + " bytes of device memory under the limit of " +
                          std::to_string(limit) + " bytes (METAJIT_DEVICE_MEMORY_LIMIT): " +
                          std::to_string(int64_t(stats().device_bytes_allocated.load())) +
                          " bytes are held by values the current kernel uses");
  try {
    return memory.allocate(bytes_);
  } catch (const AllocationError&) {  // the device is full: make room as under a limit, then try once more
    size_t freed_goal = size_t(rounded);
    int64_t before = stats().device_bytes_allocated.load();
    evict_until([&] { return before - stats().device_bytes_allocated.load() >= int64_t(freed_goal); });
    return memory.allocate(bytes_);
  }
}

void Storage::download() const {
  std::lock_guard<std::mutex> lock(copy_mutex_);
  if (host_valid_.load(std::memory_order_relaxed)) return;  // another thread copied it meanwhile
  if (!data_) {
    mapped_ = allocation_size_class(bytes_ == 0 ? 1 : bytes_) >= kHugePageBytes && huge_pages_requested();
    data_ = take_host_block(bytes_, mapped_);
  }
  if (bytes_) required_device_memory().copy_to_host(data_, device_data_, bytes_);
  stats().device_to_host_copies++;
  host_valid_.store(true, std::memory_order_release);
}

void Storage::upload() const {
  std::lock_guard<std::mutex> lock(copy_mutex_);
  if (device_valid_.load(std::memory_order_relaxed)) return;
  DeviceMemory& memory = required_device_memory();
  bool fresh_block = !device_data_;
  if (fresh_block) device_data_ = allocate_device_block();
  if (bytes_) memory.copy_to_device(device_data_, data_, bytes_);
  stats().host_to_device_copies++;
  device_valid_.store(true, std::memory_order_release);
  if (fresh_block) add_device_holder(this);
}

void release_cached_memory() {
  FreeLists& lists = free_lists();
  std::lock_guard<std::mutex> lock(lists.mutex);
  for (bool mapped : {false, true}) {
    for (auto& entry : lists.blocks_by_class[mapped])
      for (void* block : entry.second) free_block(block, entry.first, mapped);
    lists.blocks_by_class[mapped].clear();
  }
  stats().bytes_cached -= int64_t(lists.cached_bytes);
  lists.cached_bytes = 0;
}

}  // namespace metajit
