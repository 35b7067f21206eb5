// Caching allocator: blocks are rounded up to a size class and kept on a per-class free list when released,
// so a training loop that allocates the same shapes every step stops calling the system allocator.
#include "core/storage.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/stats.h"

namespace metajit {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kMaxCachedBytes = size_t(4) << 30;  // beyond this, freed blocks go straight back to the system

// Size classes: multiples of 64 bytes up to 4 KiB, then 8 steps per power of two (at most 12.5% waste).
size_t size_class(size_t bytes) {
  if (bytes <= 4096) return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  size_t power = size_t(1) << (63 - __builtin_clzll(bytes - 1));
  size_t step = power / 8;
  return (bytes + step - 1) / step * step;
}

struct FreeLists {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> blocks_by_class;
  size_t cached_bytes = 0;
};

FreeLists& free_lists() {
  static FreeLists* lists = new FreeLists();  // leaked on purpose: Storage may die during static destruction
  return *lists;
}

}  // namespace

Storage::Storage(size_t bytes) : bytes_(bytes) {
  size_t rounded = size_class(bytes == 0 ? 1 : bytes);
  FreeLists& lists = free_lists();
  {
    std::lock_guard<std::mutex> lock(lists.mutex);
    auto found = lists.blocks_by_class.find(rounded);
    if (found != lists.blocks_by_class.end() && !found->second.empty()) {
      data_ = found->second.back();
      found->second.pop_back();
      lists.cached_bytes -= rounded;
      stats().bytes_cached -= rounded;
      stats().bytes_allocated += rounded;
      return;
    }
  }
  data_ = std::aligned_alloc(kAlignment, rounded);
  if (!data_) throw AllocationError("cannot allocate " + std::to_string(bytes) + " bytes");
  stats().bytes_allocated += rounded;
}

Storage::~Storage() {
  size_t rounded = size_class(bytes_ == 0 ? 1 : bytes_);
  stats().bytes_allocated -= rounded;
  FreeLists& lists = free_lists();
  std::lock_guard<std::mutex> lock(lists.mutex);
  if (lists.cached_bytes + rounded > kMaxCachedBytes) {
    std::free(data_);
    return;
  }
  lists.blocks_by_class[rounded].push_back(data_);
  lists.cached_bytes += rounded;
  stats().bytes_cached += rounded;
}

void release_cached_memory() {
  FreeLists& lists = free_lists();
  std::lock_guard<std::mutex> lock(lists.mutex);
  for (auto& entry : lists.blocks_by_class)
    for (void* block : entry.second) std::free(block);
  lists.blocks_by_class.clear();
  stats().bytes_cached -= int64_t(lists.cached_bytes);
  lists.cached_bytes = 0;
}

}  // namespace metajit
