// Per-kernel wall time for mj.profile(): while profiling is on, the run loop times each kernel between two
// device synchronisations and records it here, one entry per distinct kernel. Only records: it must not change
// what runs.
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
};
void set_kernel_profiling(bool enabled);
bool kernel_profiling();
void record_kernel_profile(const PlannedKernel& kernel, const Node& output, double seconds);
std::vector<KernelProfile> kernel_profile();  // sorted by total time, largest first
void reset_kernel_profile();

}  // namespace metajit
