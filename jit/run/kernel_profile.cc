#include "jit/run/kernel_profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_map>

#include "core/stats.h"

namespace metajit {
namespace {

std::atomic<bool> profiling_{false};
std::mutex profile_mutex_;
std::unordered_map<std::string, KernelProfile> profile_;
std::vector<ProfileEvent> timeline_;
std::chrono::steady_clock::time_point clock_start_ = std::chrono::steady_clock::now();

}  // namespace

void set_kernel_profiling(bool enabled) { profiling_ = enabled; }
bool kernel_profiling() { return profiling_; }

double profile_clock() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - clock_start_).count();
}

void record_kernel_profile(const PlannedKernel& kernel, const Node& output, double start, double seconds) {
  int64_t host_bytes = stats().bytes_allocated.load(), device_bytes = stats().device_bytes_allocated.load();
  // CUDA kernels have no CPU key: their binary's key, or under the emulator (no binaries) their source.
  const std::string& key = !kernel.key.empty()        ? kernel.key
                           : !kernel.cuda_key.empty() ? kernel.cuda_key
                                                      : kernel.cuda.source;
  std::string name =
      (kernel.library ? kernel.library->describe() + (kernel.epilogue ? " + epilogue" : "") + ": " : "") +
      output.op_name() + " " + shape_to_string(output.shape) + " at " + output.provenance.to_string();
  // A library call alone has no key, and its description names only the primitive: every convolution's backward
  // data pass of a model read as one entry, under the first one's shape. Such a call is told apart by its name.
  std::string identity = key + "|" + (kernel.library ? kernel.library->describe() : std::string());
  if (key.empty() && kernel.library) identity += "|" + name;
  std::lock_guard<std::mutex> lock(profile_mutex_);
  KernelProfile& entry = profile_[identity];
  if (entry.launches == 0) {
    entry.key = kernel.key.empty() ? kernel.cuda_key : kernel.key;
    entry.name = std::move(name);
    int further_outputs = -1;
    for (const IrBuffer& buffer : kernel.lowered.kernel.buffers) further_outputs += buffer.is_output ? 1 : 0;
    if (!kernel.library && further_outputs > 0)
      entry.name += " (and " + std::to_string(further_outputs) + " more output" + (further_outputs > 1 ? "s)" : ")");
  }
  entry.launches++;
  entry.seconds += seconds;
  entry.peak_host_bytes = std::max(entry.peak_host_bytes, host_bytes);
  entry.peak_device_bytes = std::max(entry.peak_device_bytes, device_bytes);
  if (timeline_.size() < kMaximumProfileEvents)
    timeline_.push_back({entry.name, start, seconds, host_bytes, device_bytes});
}

std::vector<ProfileEvent> kernel_timeline() {
  std::lock_guard<std::mutex> lock(profile_mutex_);
  return timeline_;
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
  timeline_.clear();
  clock_start_ = std::chrono::steady_clock::now();
}

}  // namespace metajit
