// Source -> callable kernel, through three levels: an in-memory map, the on-disk object store
// ($METAJIT_CACHE_DIR, default ~/.cache/metajit) and finally the compiler. The key hashes everything that
// changes the binary: source, compiler identity (version, flags, CPU name and features) and the ABI version.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace metajit {

using KernelFunction = void (*)(void* const* buffers, int64_t begin, int64_t end);

constexpr int kMetajitAbiVersion = 1;

class Compiler;
class DiskStore;

class KernelCache {
 public:
  static KernelCache& instance();

  std::string key_for(const std::string& source) const;
  // Returns the kernel, compiling on a miss. Throws CompileError (with the source in the message) on failure.
  KernelFunction get(const std::string& key, const std::string& source, const std::string& header_comment);
  // Compiles every key that is in neither cache, in parallel on the runtime's threads.
  void prepare(const std::vector<std::pair<std::string, std::string>>& keys_and_sources);
  bool in_memory(const std::string& key);
  std::string directory() const;
  void set_directory(const std::string& directory);  // switches the disk store (tests, mj.flags.cache_dir)
  void clear_memory();                               // forget loaded kernels (they stay mapped)

 private:
  KernelCache();
  KernelFunction lookup_memory(const std::string& key);
  KernelFunction load_or_compile(const std::string& key, const std::string& source, const std::string& header_comment);

  std::unique_ptr<Compiler> compiler_;
  std::unique_ptr<DiskStore> disk_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, KernelFunction> loaded_;
};

}  // namespace metajit
