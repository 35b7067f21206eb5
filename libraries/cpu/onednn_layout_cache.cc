// Kept copies are per thread (a plan runs on one thread; library calls inside it use the thread pool) and
// keyed by the source's address and both layouts, so two views of one buffer never share a copy.
#include "libraries/cpu/onednn_layout_cache.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

#include "core/stats.h"
#include "core/storage.h"

namespace metajit {
namespace {

// Beyond this, a run's reordered inputs are no longer kept (they are recomputed by the next call that needs them).
constexpr size_t kMaxKeptBytes = size_t(1) << 30;
// A copy this large is dropped once this many further inputs were reordered without it being read again. A
// convolution's output gradient is read by its two backward calls, one after the other, and its weights are small;
// its input is read again only by its weight-gradient call in the backward pass, and keeping those copies through
// the forward pass held 139 MB at ResNet-18's peak (batch 32: 553 -> 448 MiB without them, for 9 more reorders
// per step, about 1% of it).
constexpr size_t kLargeCopyBytes = size_t(4) << 20;
constexpr uint64_t kLargeCopyIdleReorders = 4;

struct KeptCopy {
  const void* source;
  dnnl::memory::desc user, library;
  dnnl::memory copy;
  StoragePtr owner;
  uint64_t last_used;  // the request count when it was made or last read
};

struct KeptCopies {
  std::vector<KeptCopy> copies;
  size_t bytes = 0;
  uint64_t requests = 0;           // reordered_input calls so far
  StoragePtr scratchpad;           // see scratchpad_memory
  std::map<uintptr_t, int> reads;  // reads_in_run, by address
};

KeptCopies& kept() {
  thread_local KeptCopies copies;
  return copies;
}

// Weight copies kept across plan runs. Shared by every thread, since a buffer may die on any of them.
constexpr size_t kMaxWeightCopyBytes = size_t(512) << 20;

struct WeightCopy {
  dnnl::memory::desc user, library;
  dnnl::memory copy;
  StoragePtr owner;
  uint64_t last_used;
};

struct WeightCopies {
  std::mutex mutex;
  std::multimap<uintptr_t, WeightCopy> by_source;  // the source's address
  size_t bytes = 0;
  uint64_t reads = 0;
  std::atomic<size_t> count{0};  // by_source.size(), read without the lock by the freed-buffer hook
};

WeightCopies& weight_copies() {
  static WeightCopies* copies = new WeightCopies;  // never destroyed: buffers die until the very end
  return *copies;
}

// Removes the copies from [begin, end) and hands their buffers to `dropped`, to be freed after the lock is let go
// (freeing a buffer calls the hook, which takes the lock).
void take_weight_copies(WeightCopies& state, uintptr_t begin, uintptr_t end, std::vector<StoragePtr>& dropped) {
  auto first = state.by_source.lower_bound(begin), last = state.by_source.lower_bound(end);
  for (auto entry = first; entry != last; ++entry) {
    state.bytes -= entry->second.owner->bytes();
    dropped.push_back(std::move(entry->second.owner));
  }
  state.by_source.erase(first, last);
  state.count.store(state.by_source.size(), std::memory_order_relaxed);
}

}  // namespace

dnnl::memory scratch_memory(const dnnl::memory::desc& desc, const dnnl::engine& engine,
                            std::vector<StoragePtr>& owners) {
  owners.push_back(std::make_shared<Storage>(desc.get_size()));
  return dnnl::memory(desc, engine, owners.back()->data());
}

dnnl::memory scratchpad_memory(const dnnl::memory::desc& desc, const dnnl::engine& engine) {
  StoragePtr& scratchpad = kept().scratchpad;
  size_t bytes = desc.get_size();
  if (!scratchpad || scratchpad->bytes() < bytes) {
    scratchpad.reset();  // first, so the allocator may hand its block back for the larger one
    scratchpad = std::make_shared<Storage>(bytes);
  }
  return dnnl::memory(desc, engine, scratchpad->data());
}

dnnl::memory reordered_input(const dnnl::memory& user, const dnnl::memory::desc& library, dnnl::stream& stream,
                             std::vector<StoragePtr>& owners) {
  KeptCopies& state = kept();
  const void* source = user.get_data_handle();
  dnnl::memory::desc user_desc = user.get_desc();
  ++state.requests;
  for (size_t index = 0; index < state.copies.size();) {
    const KeptCopy& entry = state.copies[index];
    if (entry.owner->bytes() >= kLargeCopyBytes && state.requests - entry.last_used > kLargeCopyIdleReorders) {
      state.bytes -= entry.owner->bytes();
      state.copies.erase(state.copies.begin() + long(index));
    } else {
      ++index;
    }
  }
  for (KeptCopy& entry : state.copies)
    if (entry.source == source && entry.user == user_desc && entry.library == library) {
      stats().library_reorders_reused++;
      entry.last_used = state.requests;
      return entry.copy;
    }
  auto owner = std::make_shared<Storage>(library.get_size());
  dnnl::memory copy(library, user.get_engine(), owner->data());
  dnnl::memory source_memory = user;  // execute() takes non-const handles
  dnnl::reorder(source_memory, copy).execute(stream, source_memory, copy);
  stats().library_reorders++;
  // Under a memory budget a copy is made again where it is needed: kept, the blocked copies of ResNet-18's
  // activations and weights held 27 MiB at its step's peak (batch 16 and 32) for 43 fewer reorders a step.
  if (!saving_memory() && state.bytes + owner->bytes() <= kMaxKeptBytes) {
    state.bytes += owner->bytes();
    state.copies.push_back({source, user_desc, library, copy, owner, state.requests});
  } else {
    owners.push_back(owner);
  }
  return copy;
}

dnnl::memory reordered_weights(const dnnl::memory& user, const dnnl::memory::desc& library, dnnl::stream& stream,
                               std::vector<StoragePtr>& owners) {
  WeightCopies& state = weight_copies();
  auto source = reinterpret_cast<uintptr_t>(user.get_data_handle());
  dnnl::memory::desc user_desc = user.get_desc();
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    auto [first, last] = state.by_source.equal_range(source);
    for (auto entry = first; entry != last; ++entry)
      if (entry->second.user == user_desc && entry->second.library == library) {
        entry->second.last_used = ++state.reads;
        stats().library_reorders_reused++;
        owners.push_back(entry->second.owner);  // alive through the call, whatever drops the entry meanwhile
        return entry->second.copy;
      }
  }
  auto owner = std::make_shared<Storage>(library.get_size());
  dnnl::memory copy(library, user.get_engine(), owner->data());
  dnnl::memory source_memory = user;  // execute() takes non-const handles
  dnnl::reorder(source_memory, copy).execute(stream, source_memory, copy);
  stats().library_reorders++;
  owners.push_back(owner);
  if (owner->bytes() > kMaxWeightCopyBytes) return copy;
  std::vector<StoragePtr> dropped;  // freed after the lock
  std::lock_guard<std::mutex> lock(state.mutex);
  while (state.bytes + owner->bytes() > kMaxWeightCopyBytes) {
    auto oldest = state.by_source.begin();
    for (auto entry = state.by_source.begin(); entry != state.by_source.end(); ++entry)
      if (entry->second.last_used < oldest->second.last_used) oldest = entry;
    state.bytes -= oldest->second.owner->bytes();
    dropped.push_back(std::move(oldest->second.owner));
    state.by_source.erase(oldest);
  }
  state.bytes += owner->bytes();
  state.by_source.emplace(source, WeightCopy{user_desc, library, copy, owner, ++state.reads});
  state.count.store(state.by_source.size(), std::memory_order_relaxed);
  return copy;
}

void forget_weight_copies_within(const void* address, size_t bytes) {
  WeightCopies& state = weight_copies();
  if (state.count.load(std::memory_order_relaxed) == 0) return;  // every freed buffer passes here
  auto begin = reinterpret_cast<uintptr_t>(address);
  std::vector<StoragePtr> dropped;
  std::lock_guard<std::mutex> lock(state.mutex);
  take_weight_copies(state, begin, begin + bytes, dropped);
}

void drop_weight_copies() {
  WeightCopies& state = weight_copies();
  std::vector<StoragePtr> dropped;
  std::lock_guard<std::mutex> lock(state.mutex);
  take_weight_copies(state, 0, UINTPTR_MAX, dropped);
}

int reads_in_run(const void* address) { return ++kept().reads[reinterpret_cast<uintptr_t>(address)]; }

void forget_copies_within(const void* address, size_t bytes) {
  forget_weight_copies_within(address, bytes);
  KeptCopies& state = kept();
  auto begin = reinterpret_cast<uintptr_t>(address), end = begin + bytes;
  state.reads.erase(state.reads.lower_bound(begin), state.reads.lower_bound(end));  // another tensor may come there
  for (size_t index = 0; index < state.copies.size();) {
    auto source = reinterpret_cast<uintptr_t>(state.copies[index].source);
    if (source >= begin && source < end) {
      state.bytes -= state.copies[index].owner->bytes();
      state.copies.erase(state.copies.begin() + long(index));
    } else {
      ++index;
    }
  }
}

void drop_layout_copies() {
  KeptCopies& state = kept();
  state.copies.clear();
  state.bytes = 0;
  state.requests = 0;
  state.reads.clear();
  state.scratchpad.reset();
}

}  // namespace metajit
