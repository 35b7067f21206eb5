// Content-addressed on-disk store: opaque bytes in, opaque bytes out, one file per key at
// <directory>/<key[0:2]>/<key>.mjk. It must not know what it stores (kernels, metadata) and must never
// throw from load/store or crash on garbage files; any disk trouble degrades it to "disabled" (memory-only).
// Bounded: a size limit is kept by removing the least recently used entries (a load touches its entry's
// modification time). Safe with other processes using the same folder: writes are renamed into place, and an
// entry removed under a process that has it open stays readable to it; one that loses an entry rebuilds it.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace metajit {

class DiskStore {
 public:
  // Creates `directory` (mkdir -p, mode 0700) if missing. Empty string => disabled (memory-only).
  // An uncreatable or unwritable directory also gives a disabled store, with one warning saying why.
  explicit DiskStore(std::string directory);

  bool enabled() const;
  const std::string& directory() const;

  // The payload stored under `key`, or nullopt when missing. A truncated or corrupt entry (bad magic,
  // wrong length, checksum mismatch) is deleted, counted in stats().cache_entries_discarded, logged at Info.
  // Entries not owned by this user, or writable by group/others, are refused (one warning, counted, kept).
  std::optional<std::string> load(const std::string& key);
  // Whether an entry file exists for `key` (not whether it is intact: load() checks that).
  bool contains(const std::string& key) const;

  // Atomic write: unique temp file in the entry's folder, then rename(). Returns false on failure; an I/O
  // failure (disk full, read-only file system, permissions) warns once and disables the store.
  // Keys must be 2-200 characters of [A-Za-z0-9_-]; other keys are refused (false / nullopt).
  bool store(const std::string& key, const std::string& payload);

  size_t entry_count() const;
  std::vector<std::string> keys() const;  // sorted
  void clear();                           // removes entries and stray temp files only, never other files

  // The most bytes (headers included) the folder's entries may take; 0: no limit. When a store takes the total
  // past it, the least recently used entries are removed until the total is at most 90% of it.
  void set_size_limit(uint64_t bytes);
  uint64_t size_limit() const;
  struct PruneResult {
    size_t removed = 0;      // entries deleted
    uint64_t freed = 0;      // their bytes
    size_t entries = 0;      // entries left
    uint64_t remaining = 0;  // their bytes
  };
  // Removes least recently used entries until the entries take at most `target_bytes`.
  PruneResult prune(uint64_t target_bytes);
  // The entries' total size now (a scan of the folder).
  uint64_t total_bytes() const;

 private:
  void disable(const std::string& reason);
  std::string entry_path(const std::string& key) const;
  void keep_within_limit(uint64_t stored_bytes);

  std::string directory_;
  std::atomic<uint64_t> size_limit_{0};
  std::mutex size_mutex_;          // one prune at a time; guards estimated_bytes_
  int64_t estimated_bytes_ = -1;   // the folder's total as last scanned plus this process's stores since
  std::atomic<bool> enabled_{false};
  std::atomic<bool> warned_untrusted_{false};
  std::atomic<bool> warned_disabled_{false};
};

}  // namespace metajit
