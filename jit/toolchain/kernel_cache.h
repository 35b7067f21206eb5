// Source -> callable kernel, through four levels: an in-memory map, deployment bundles (mj.cache.load_bundle),
// the on-disk store ($METAJIT_CACHE_DIR, default ~/.cache/metajit) and finally the compiler. The key hashes
// everything that changes the binary: source, compiler identity (version, flags, CPU name and features,
// C++ library headers) and the ABI version.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "jit/loader/kernel_abi.h"

namespace metajit {

class Compiler;
class DiskStore;

// Compiling was needed but is switched off (METAJIT_COMPILE=never, for deployment with a bundle).
struct MissingKernelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct KernelRequest {
  std::string key;
  std::string source;
  std::string header_comment;
};

class KernelCache {
 public:
  static KernelCache& instance();

  std::string key_for(const std::string& source) const;
  const std::string& compiler_identity() const;
  // Returns the kernel, compiling on a miss. Throws CompileError (the compiler's diagnostics) on failure and
  // MissingKernelError when it would have to compile while compiling is off.
  KernelFunction get(const std::string& key, const std::string& source, const std::string& header_comment);
  // Compiles every key that is in no cache, in parallel on the runtime's threads.
  void prepare(const std::vector<KernelRequest>& requests);
  // The kernel's object file (ELF), compiling it on a miss: what a CUDA-emulator test links itself.
  std::string object_bytes(const std::string& key, const std::string& source, const std::string& header_comment);
  bool in_memory(const std::string& key);
  // Where get() would find `key` now, without loading it: "memory", "bundle", "disk", or "" (compile).
  std::string locate(const std::string& key);
  std::string directory() const;
  void set_directory(const std::string& directory);  // switches the disk store (tests, mj.flags.cache_dir)
  DiskStore& disk();                                 // for the cache CLI (list, verify, clear)
  void clear_memory();                               // forget loaded kernels (they stay mapped)

  // Deployment bundles: encoded entries (jit/toolchain/kernel_entry.h) served before the disk store.
  void add_bundle_entries(const std::vector<std::pair<std::string, std::string>>& entries);
  void clear_bundle_entries();
  size_t bundle_entry_count();

  // Recording: the keys of every kernel fetched between start and stop, for packing a bundle. Recordings
  // may overlap (`pack` records a whole script that records a part of itself); each has its own id.
  int start_recording();
  std::vector<std::string> stop_recording(int recording);  // sorted
  // The encoded entry of a kernel this process loaded or compiled (or one in the disk store), if any.
  std::optional<std::string> entry_bytes(const std::string& key);
  // The key of the runtime support object (jit/codegen/cpp/runtime_support.h) on this machine.
  const std::string& runtime_support_key() const { return runtime_support_key_; }

  // Entries of other backends (CUDA binaries), kept in the same bundles and disk store: the entry under `key`
  // from a loaded bundle or the disk ("bundle"/"disk" in *origin), and keeping a newly built one (stored on
  // disk and noted by recordings, so a packed bundle carries it beside the CPU objects).
  std::optional<std::string> stored_entry(const std::string& key, std::string* origin);
  void keep_entry(const std::string& key, const std::string& entry);

  // METAJIT_COMPILE=never (false) makes a needed compile raise MissingKernelError.
  void set_compile_allowed(bool allowed) { compile_allowed_ = allowed; }
  bool compile_allowed() const { return compile_allowed_; }
  // METAJIT_DUMP_DIR ("" = off).
  void set_dump_directory(const std::string& directory);
  std::string dump_directory() const;

 private:
  KernelCache();
  KernelFunction lookup_memory(const std::string& key);
  KernelFunction load_or_compile(const std::string& key, const std::string& source, const std::string& header_comment);
  KernelFunction load_entry(const std::string& key, std::string entry, const char* origin,
                            const std::string& header_comment, const std::string& source);
  void remember(const std::string& key, KernelFunction function, std::string entry);
  void note_use(const std::string& key);
  // Before kernel `key`'s object is linked: links the runtime support object (jit/codegen/cpp/runtime_support.h) when
  // the kernel calls a helper of it that is not linked yet. Throws as get() does when the support cannot be had.
  // Returns whether the kernel calls into it.
  bool link_runtime_support_for(const std::string& key, const std::string& object);
  void store_runtime_support_on(DiskStore& disk);  // unless it is there already

  std::unique_ptr<Compiler> compiler_;
  std::unique_ptr<DiskStore> disk_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, KernelFunction> loaded_;
  std::unordered_map<std::string, std::shared_ptr<const std::string>> entries_;  // of loaded kernels
  std::unordered_map<std::string, std::string> bundle_;
  std::atomic<bool> recording_{false};
  int next_recording_ = 1;
  std::map<int, std::set<std::string>> recordings_;
  std::atomic<bool> compile_allowed_{true};
  std::string runtime_support_key_;
  std::mutex runtime_support_mutex_;               // one thread links the support object; others wait for it
  std::atomic<bool> runtime_support_linked_{false};  // recordings then carry its key (bundles need it)
  std::string dump_directory_;
};

}  // namespace metajit
