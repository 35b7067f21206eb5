// Content-addressed on-disk store: opaque bytes in, opaque bytes out, one file per key at
// <directory>/<key[0:2]>/<key>.mjk. It must not know what it stores (kernels, metadata) and must never
// throw from load/store or crash on garbage files; any disk trouble degrades it to "disabled" (memory-only).
#pragma once
#include <atomic>
#include <cstddef>
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

 private:
  void disable(const std::string& reason);
  std::string entry_path(const std::string& key) const;

  std::string directory_;
  std::atomic<bool> enabled_{false};
  std::atomic<bool> warned_untrusted_{false};
  std::atomic<bool> warned_disabled_{false};
};

}  // namespace metajit
