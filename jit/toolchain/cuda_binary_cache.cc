#include "jit/toolchain/cuda_binary_cache.h"

#include <atomic>
#include <chrono>
#include <unordered_set>

#include "cache/content_hash.h"
#include "cache/disk_store.h"
#include "core/log.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "jit/toolchain/kernel_cache.h"
#include "jit/toolchain/kernel_entry.h"

namespace metajit {

CudaBinaryCache& CudaBinaryCache::instance() {
  static CudaBinaryCache cache;
  return cache;
}

std::string CudaBinaryCache::key_for(const std::string& source, const CudaTarget& target) const {
  return content_hash(source + "\n//" + NvrtcCompiler::instance().identity(target) + "\n//abi=" +
                      std::to_string(kMetajitAbiVersion));
}

std::string CudaBinaryCache::locate(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (binaries_.count(key)) return "memory";
  }
  KernelCache& store = KernelCache::instance();
  std::string where = store.locate(key);
  return where == "memory" ? "" : where;  // a CPU kernel of the same key cannot exist; be safe
}

CachedCudaBinary CudaBinaryCache::get(const std::string& key, const std::string& source,
                                      const std::string& header_comment, const CudaTarget& target) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = binaries_.find(key);
    if (found != binaries_.end()) return {found->second, "memory"};
  }
  KernelCache& store = KernelCache::instance();
  std::string origin;
  if (std::optional<std::string> entry = store.stored_entry(key, &origin)) {
    std::optional<KernelEntry> decoded = decode_kernel_entry(*entry);
    if (decoded && !decoded->object.empty()) {
      CudaBinary binary;
      binary.bytes = decoded->object;
      binary.is_ptx = binary.bytes.rfind("\x7f" "ELF", 0) != 0;
      binary.architecture = target.name();
      size_t named = binary.bytes.find(".target sm_");  // PTX names the architecture it was generated for
      if (binary.is_ptx && named != std::string::npos)
        binary.architecture = "compute_" + binary.bytes.substr(named + 11, binary.bytes.find_first_not_of("0123456789", named + 11) - named - 11);
      if (origin == "bundle")
        stats().kernels_loaded_from_bundle++;
      else
        stats().kernels_loaded_from_disk++;
      std::lock_guard<std::mutex> lock(mutex_);
      binaries_[key] = binary;
      return {binary, origin};
    }
    stats().cache_entries_discarded++;
    log_warning("discarding unusable " + origin + " entry " + key + " (not a CUDA binary entry); rebuilding it");
  }
  if (!store.compile_allowed()) {
    throw MissingKernelError("METAJIT_COMPILE=never, but CUDA kernel " + key +
                             " is in no loaded bundle and not in the cache at " + store.directory());
  }
  auto start = std::chrono::steady_clock::now();
  CudaBinary binary = NvrtcCompiler::instance().compile(source, target);
  int64_t nanoseconds =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  stats().kernels_compiled++;
  stats().compile_nanoseconds += nanoseconds;
  if (log_enabled(LogLevel::Info))
    log_message(LogLevel::Info, "CUDA kernel " + key + ": compiled for " + binary.architecture + " in " +
                                    std::to_string(nanoseconds / 1e6) + " ms");
  store.keep_entry(key, encode_kernel_entry({binary.bytes, header_comment + source}));
  std::lock_guard<std::mutex> lock(mutex_);
  binaries_[key] = binary;
  return {binary, "compiled"};
}

int CudaBinaryCache::prepare(const std::vector<CudaKernelRequest>& requests, const CudaTarget& target) {
  std::vector<const CudaKernelRequest*> missing;
  std::unordered_set<std::string> seen;  // a plan may launch one kernel several times (identical layers)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const CudaKernelRequest& request : requests)
      if (seen.insert(request.key).second && !binaries_.count(request.key)) missing.push_back(&request);
  }
  std::atomic<int> compiled{0};
  parallel_for(int64_t(missing.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) {
      try {
        const CudaKernelRequest& request = *missing[index];
        if (get(request.key, request.source, request.header_comment, target).origin == "compiled") compiled++;
      } catch (...) {
        // get() is asked again at launch, on the calling thread, and reports the error with full context.
      }
    }
  });
  return compiled;
}

void CudaBinaryCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mutex_);
  binaries_.clear();
}

}  // namespace metajit
