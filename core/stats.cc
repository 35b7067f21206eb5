// Counter storage and the snapshot handed to Python.
#include "core/stats.h"

namespace metajit {

Stats& stats() {
  static Stats instance;
  return instance;
}

void reset_stats() {
  Stats& counters = stats();
  counters.kernels_compiled = 0;
  counters.kernels_loaded_from_disk = 0;
  counters.kernels_loaded_from_bundle = 0;
  counters.kernel_memory_hits = 0;
  counters.kernels_launched = 0;
  counters.library_calls = 0;
  counters.library_calls_made = 0;
  counters.library_reorders = 0;
  counters.library_reorders_reused = 0;
  counters.planning_nanoseconds = 0;
  counters.planned_nodes = 0;
  counters.plans_made = 0;
  counters.compile_nanoseconds = 0;
  counters.cache_entries_discarded = 0;
  counters.host_to_device_copies = 0;
  counters.device_to_host_copies = 0;
  counters.device_evictions = 0;
  counters.buffers_released_early = 0;
  counters.bytes_allocated_peak = counters.bytes_allocated.load();
  counters.device_bytes_allocated_peak = counters.device_bytes_allocated.load();
}

namespace {
void add_keeping_peak(std::atomic<int64_t>& gauge, std::atomic<int64_t>& peak, int64_t bytes) {
  int64_t now = gauge += bytes;
  int64_t highest = peak.load(std::memory_order_relaxed);
  while (now > highest && !peak.compare_exchange_weak(highest, now, std::memory_order_relaxed)) {
  }
}
}  // namespace

void add_bytes_allocated(int64_t bytes) {
  add_keeping_peak(stats().bytes_allocated, stats().bytes_allocated_peak, bytes);
}

void add_device_bytes_allocated(int64_t bytes) {
  add_keeping_peak(stats().device_bytes_allocated, stats().device_bytes_allocated_peak, bytes);
}

std::map<std::string, double> stats_snapshot() {
  Stats& counters = stats();
  return {
      {"kernels_compiled", double(counters.kernels_compiled)},
      {"kernels_loaded_from_disk", double(counters.kernels_loaded_from_disk)},
      {"kernels_loaded_from_bundle", double(counters.kernels_loaded_from_bundle)},
      {"kernel_memory_hits", double(counters.kernel_memory_hits)},
      {"kernels_launched", double(counters.kernels_launched)},
      {"library_calls", double(counters.library_calls)},
      {"library_calls_made", double(counters.library_calls_made)},
      {"library_reorders", double(counters.library_reorders)},
      {"library_reorders_reused", double(counters.library_reorders_reused)},
      {"compile_seconds", double(counters.compile_nanoseconds) * 1e-9},
      {"planning_seconds", double(counters.planning_nanoseconds) * 1e-9},
      {"planned_nodes", double(counters.planned_nodes)},
      {"plans_made", double(counters.plans_made)},
      {"cache_entries_discarded", double(counters.cache_entries_discarded)},
      {"buffers_released_early", double(counters.buffers_released_early)},
      {"vars_live", double(counters.vars_live)},
      {"bytes_allocated", double(counters.bytes_allocated)},
      {"bytes_cached", double(counters.bytes_cached)},
      {"bytes_allocated_peak", double(counters.bytes_allocated_peak)},
      {"device_bytes_allocated", double(counters.device_bytes_allocated)},
      {"device_bytes_cached", double(counters.device_bytes_cached)},
      {"device_bytes_allocated_peak", double(counters.device_bytes_allocated_peak)},
      {"device_evictions", double(counters.device_evictions)},
      {"host_to_device_copies", double(counters.host_to_device_copies)},
      {"device_to_host_copies", double(counters.device_to_host_copies)},
      {"dynamic_scalar_sites", double(counters.dynamic_scalar_sites)},
  };
}

}  // namespace metajit
