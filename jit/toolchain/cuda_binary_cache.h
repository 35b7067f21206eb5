// CUDA binaries (CUBIN or PTX) by key: an in-memory map, then loaded bundles and the disk store (the same ones
// the CPU kernel cache uses, so a bundle carries CPU objects and CUDA binaries side by side), then NVRTC.
// Keys hash the source with the NVRTC identity: version, flags and target architecture.
#pragma once
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "jit/toolchain/nvrtc_compiler.h"

namespace metajit {

struct CachedCudaBinary {
  CudaBinary binary;
  std::string origin;  // "memory", "bundle", "disk" or "compiled"
};

struct CudaKernelRequest {
  std::string key, source, header_comment;
};

class CudaBinaryCache {
 public:
  static CudaBinaryCache& instance();
  // Throws CudaUnavailableError when NVRTC is missing (its version is part of the key).
  std::string key_for(const std::string& source, const CudaTarget& target) const;
  // Where get() would find `key` now: "memory", "bundle", "disk" or "" (compile).
  std::string locate(const std::string& key);
  // Throws CompileError with NVRTC's log, CudaUnavailableError without NVRTC, MissingKernelError when it would
  // have to compile while compiling is off (METAJIT_COMPILE=never).
  CachedCudaBinary get(const std::string& key, const std::string& source, const std::string& header_comment,
                       const CudaTarget& target);
  // Brings every requested binary not yet in memory in from the bundle, the disk or NVRTC, several at once on
  // the thread pool: a new plan's kernels compile in parallel instead of one by one as they launch. Errors are
  // left for get() to report, with the node's context. Returns how many were compiled.
  int prepare(const std::vector<CudaKernelRequest>& requests, const CudaTarget& target);
  // Forgets the binaries held in memory (mj._core.clear_memory_cache): the next get() reads the disk again.
  void clear_memory();

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, CudaBinary> binaries_;
};

}  // namespace metajit
