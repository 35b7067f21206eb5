// Process-wide counters behind mj.stats(). Lock-free increments; the executor, cache and compiler bump them.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace metajit {

struct Stats {
  std::atomic<int64_t> kernels_compiled{0};
  std::atomic<int64_t> kernels_loaded_from_disk{0};
  std::atomic<int64_t> kernels_loaded_from_bundle{0};  // served by a deployment bundle (mj.cache.load_bundle)
  std::atomic<int64_t> kernel_memory_hits{0};
  std::atomic<int64_t> kernels_launched{0};
  std::atomic<int64_t> library_calls{0};             // kernels run by a vendor library (oneDNN) instead
  std::atomic<int64_t> library_calls_made{0};        // calls a backend built (a oneDNN primitive each)
  std::atomic<int64_t> library_reorders{0};          // tensors copied into or out of a library's own layout
  std::atomic<int64_t> library_reorders_reused{0};   // inputs a call found already copied by an earlier call
  std::atomic<int64_t> compile_nanoseconds{0};
  std::atomic<int64_t> planning_nanoseconds{0};      // fusion planning, lowering and rendering at syncs
  std::atomic<int64_t> planned_nodes{0};             // pending nodes of the graphs planned (plan cache misses)
  std::atomic<int64_t> plans_made{0};                // graphs planned (plan cache misses)
  std::atomic<int64_t> cache_entries_discarded{0};  // corrupt or untrusted disk entries thrown away
  std::atomic<int64_t> buffers_released_early{0};    // intermediate buffers freed after their last reader, mid-run
  std::atomic<int64_t> vars_live{0};                 // graph nodes currently alive (not reset)
  std::atomic<int64_t> bytes_allocated{0};           // host bytes handed out by the allocator (not reset)
  std::atomic<int64_t> bytes_cached{0};              // host bytes held in the allocator's free lists (not reset)
  std::atomic<int64_t> bytes_allocated_peak{0};      // the most bytes_allocated has been (reset: to its current value)
  std::atomic<int64_t> device_bytes_allocated{0};    // GPU bytes handed out (not reset)
  std::atomic<int64_t> device_bytes_cached{0};       // GPU bytes held in the device allocator's free lists (not reset)
  std::atomic<int64_t> device_bytes_allocated_peak{0};  // the most device_bytes_allocated has been (reset: to now)
  std::atomic<int64_t> host_to_device_copies{0};     // values uploaded to the GPU
  std::atomic<int64_t> device_evictions{0};          // device copies moved to the host to make room (unified memory)
  std::atomic<int64_t> device_to_host_copies{0};     // values downloaded from the GPU
  std::atomic<int64_t> dynamic_scalar_sites{0};      // places whose Python numbers became kernel inputs (not reset)
};

Stats& stats();
// Adds to bytes_allocated or device_bytes_allocated (negative: a release) and keeps its peak.
void add_bytes_allocated(int64_t bytes);
void add_device_bytes_allocated(int64_t bytes);
void reset_stats();                                   // zeroes the event counters, keeps the live gauges
std::map<std::string, double> stats_snapshot();

}  // namespace metajit
