// Per-kernel wall time and memory for mj.profile(): while profiling is on, the run loop times each kernel between
// two device synchronisations and records it here, one entry per distinct kernel, plus one timeline event per
// launch with the bytes in use right after it (the kernel's outputs allocated, nothing it made dead released
// yet), from which a step's memory over time is drawn. Only records: it must not change what runs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/node.h"
#include "jit/plan/plan.h"

namespace metajit {

struct KernelProfile {
  std::string name;  // the library call, or the kernel's root op, shape and user line
  std::string key;   // cache key ("" for a library call alone)
  int64_t launches = 0;
  double seconds = 0;
  int64_t peak_host_bytes = 0;    // the most host bytes in use right after one of its launches
  int64_t peak_device_bytes = 0;  // the same for GPU (or emulated GPU) memory
};
struct ProfileEvent {
  std::string name;  // the entry's name
  double start = 0;  // seconds since profiling was last reset
  double seconds = 0;
  int64_t host_bytes = 0;  // in use right after the launch
  int64_t device_bytes = 0;
};
// The timeline keeps the first this many launches, so a profile left on through a long run stays bounded.
constexpr size_t kMaximumProfileEvents = 1 << 20;
void set_kernel_profiling(bool enabled);
bool kernel_profiling();
void record_kernel_profile(const PlannedKernel& kernel, const Node& output, double start, double seconds);
std::vector<KernelProfile> kernel_profile();  // sorted by total time, largest first
std::vector<ProfileEvent> kernel_timeline();  // in launch order
// Seconds since the profile was last reset, the clock of ProfileEvent::start.
double profile_clock();
void reset_kernel_profile();

}  // namespace metajit
