#include "jit/run/kernel_profile.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

namespace metajit {
namespace {

std::atomic<bool> profiling_{false};
std::mutex profile_mutex_;
std::unordered_map<std::string, KernelProfile> profile_;

}  // namespace

void set_kernel_profiling(bool enabled) { profiling_ = enabled; }
bool kernel_profiling() { return profiling_; }

void record_kernel_profile(const PlannedKernel& kernel, const Node& output, double seconds) {
  // CUDA kernels have no CPU key: their binary's key, or under the emulator (no binaries) their source.
  const std::string& key = !kernel.key.empty()        ? kernel.key
                           : !kernel.cuda_key.empty() ? kernel.cuda_key
                                                      : kernel.cuda.source;
  std::string identity = key + "|" + (kernel.library ? kernel.library->describe() : std::string());
  std::lock_guard<std::mutex> lock(profile_mutex_);
  KernelProfile& entry = profile_[identity];
  if (entry.launches == 0) {
    entry.key = kernel.key.empty() ? kernel.cuda_key : kernel.key;
    entry.name = (kernel.library ? kernel.library->describe() + (kernel.epilogue ? " + epilogue" : "") + ": " : "") +
                 output.op_name() + " " + shape_to_string(output.shape) + " at " + output.provenance.to_string();
    int further_outputs = -1;
    for (const IrBuffer& buffer : kernel.lowered.kernel.buffers) further_outputs += buffer.is_output ? 1 : 0;
    if (!kernel.library && further_outputs > 0)
      entry.name += " (and " + std::to_string(further_outputs) + " more output" + (further_outputs > 1 ? "s)" : ")");
  }
  entry.launches++;
  entry.seconds += seconds;
}

std::vector<KernelProfile> kernel_profile() {
  std::vector<KernelProfile> entries;
  {
    std::lock_guard<std::mutex> lock(profile_mutex_);
    for (const auto& [identity, entry] : profile_) entries.push_back(entry);
  }
  std::sort(entries.begin(), entries.end(),
            [](const KernelProfile& a, const KernelProfile& b) { return a.seconds > b.seconds; });
  return entries;
}

void reset_kernel_profile() {
  std::lock_guard<std::mutex> lock(profile_mutex_);
  profile_.clear();
}

}  // namespace metajit
