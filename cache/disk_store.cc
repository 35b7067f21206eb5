// On-disk entry format, atomic writes and the trust checks behind disk_store.h.
// Entry file = 24-byte header (magic "MJK1", u32 format version, u64 payload size, u64 XXH3-64 of the payload,
// all little-endian) followed by the payload. This file must not interpret payloads, throw, or follow symlinks
// for entries; clear() deletes only files it could have written (*.mjk and its own temp files).
#include "cache/disk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>

#include "cache/content_hash.h"
#include "core/log.h"
#include "core/stats.h"

namespace metajit {
namespace {

constexpr char kMagic[4] = {'M', 'J', 'K', '1'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 24;
constexpr size_t kMaximumKeyLength = 200;
constexpr const char* kEntrySuffix = ".mjk";
constexpr const char* kTemporarySuffix = ".tmp";

std::string error_text(int error_number) { return std::strerror(error_number); }

void put_u32(unsigned char* destination, uint32_t value) {
  for (int byte = 0; byte < 4; ++byte) destination[byte] = static_cast<unsigned char>(value >> (8 * byte));
}
void put_u64(unsigned char* destination, uint64_t value) {
  for (int byte = 0; byte < 8; ++byte) destination[byte] = static_cast<unsigned char>(value >> (8 * byte));
}
uint32_t get_u32(const unsigned char* source) {
  uint32_t value = 0;
  for (int byte = 3; byte >= 0; --byte) value = (value << 8) | source[byte];
  return value;
}
uint64_t get_u64(const unsigned char* source) {
  uint64_t value = 0;
  for (int byte = 7; byte >= 0; --byte) value = (value << 8) | source[byte];
  return value;
}

bool valid_key(const std::string& key) {
  if (key.size() < 2 || key.size() > kMaximumKeyLength) return false;
  return std::all_of(key.begin(), key.end(), [](char character) {
    return (character >= 'a' && character <= 'z') || (character >= 'A' && character <= 'Z') ||
           (character >= '0' && character <= '9') || character == '_' || character == '-';
  });
}

std::string shard_name(const std::string& key) { return key.substr(0, 2); }

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// mkdir -p with mode 0700 for every folder it creates. On failure, `why` says which component and why.
bool make_directories(const std::string& path, std::string* why) {
  std::string partial = path[0] == '/' ? "/" : "";
  size_t position = 0;
  while (position < path.size()) {
    size_t slash = path.find('/', position);
    if (slash == std::string::npos) slash = path.size();
    std::string component = path.substr(position, slash - position);
    position = slash + 1;
    if (component.empty() || component == ".") continue;
    partial += component;
    if (::mkdir(partial.c_str(), 0700) == 0) {
      ::chmod(partial.c_str(), 0700);  // the umask may have removed bits we need; never adds group/other bits
    } else if (errno == EEXIST) {
      struct stat status;
      if (::stat(partial.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) {
        *why = "'" + partial + "' exists and is not a directory";
        return false;
      }
    } else {
      *why = "cannot create '" + partial + "': " + error_text(errno);
      return false;
    }
    partial += '/';
  }
  return true;
}

bool write_all(int descriptor, const void* data, size_t size) {
  const char* cursor = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t written = ::write(descriptor, cursor, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    cursor += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

// Reads exactly `size` bytes; false on error or early end of file.
bool read_all(int descriptor, void* data, size_t size) {
  char* cursor = static_cast<char*>(data);
  while (size > 0) {
    ssize_t got = ::read(descriptor, cursor, size);
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (got == 0) return false;
    cursor += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

std::string temporary_name(const std::string& key) {
  static std::atomic<uint64_t> counter{0};
  return "." + key + "." + std::to_string(::getpid()) + "." +
         std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id())) + "." +
         std::to_string(counter.fetch_add(1)) + kTemporarySuffix;
}

// Calls visit(shard_path, file_name) for every plain file inside the two-character shard folders.
template <typename Visitor>
void for_each_shard_file(const std::string& directory, Visitor visit, bool remove_empty_shards = false) {
  DIR* top = ::opendir(directory.c_str());
  if (!top) return;
  std::vector<std::string> shards;
  while (dirent* entry = ::readdir(top)) {
    std::string name = entry->d_name;
    if (name.size() == 2 && name[0] != '.') shards.push_back(name);
  }
  ::closedir(top);
  for (const std::string& shard : shards) {
    std::string shard_path = directory + "/" + shard;
    struct stat status;
    if (::lstat(shard_path.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) continue;
    DIR* folder = ::opendir(shard_path.c_str());
    if (!folder) continue;
    std::vector<std::string> files;
    while (dirent* entry = ::readdir(folder)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..") files.push_back(name);
    }
    ::closedir(folder);
    for (const std::string& file : files) visit(shard_path, file);
    if (remove_empty_shards) ::rmdir(shard_path.c_str());  // fails harmlessly when not empty
  }
}

}  // namespace

DiskStore::DiskStore(std::string directory) : directory_(std::move(directory)) {
  while (directory_.size() > 1 && directory_.back() == '/') directory_.pop_back();
  if (directory_.empty()) return;
  std::string why;
  if (!make_directories(directory_, &why)) {
    disable(why);
    return;
  }
  if (::faccessat(AT_FDCWD, directory_.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
    disable("'" + directory_ + "' is not writable: " + error_text(errno));
    return;
  }
  enabled_ = true;
}

bool DiskStore::enabled() const { return enabled_.load(std::memory_order_relaxed); }

const std::string& DiskStore::directory() const { return directory_; }

std::string DiskStore::entry_path(const std::string& key) const {
  return directory_ + "/" + shard_name(key) + "/" + key + kEntrySuffix;
}

void DiskStore::disable(const std::string& reason) {
  enabled_ = false;
  if (warned_disabled_.exchange(true)) return;
  log_warning("kernel cache directory '" + directory_ + "' is not usable (" + reason +
              "); compiled kernels will only be cached in memory for this process");
}

bool DiskStore::contains(const std::string& key) const {
  if (!enabled() || !valid_key(key)) return false;
  struct stat status;
  return ::lstat(entry_path(key).c_str(), &status) == 0 && S_ISREG(status.st_mode);
}

std::optional<std::string> DiskStore::load(const std::string& key) {
  if (!enabled() || !valid_key(key)) return std::nullopt;
  const std::string path = entry_path(key);
  int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (descriptor < 0) {
    if (errno != ENOENT && errno != ENOTDIR && log_enabled(LogLevel::Info))
      log_message(LogLevel::Info, "cannot open cache entry " + path + ": " + error_text(errno));
    return std::nullopt;
  }
  struct stat status;
  if (::fstat(descriptor, &status) != 0) {
    ::close(descriptor);
    return std::nullopt;
  }
  if (!S_ISREG(status.st_mode) || status.st_uid != ::geteuid() || (status.st_mode & (S_IWGRP | S_IWOTH))) {
    ::close(descriptor);
    stats().cache_entries_discarded++;
    if (!warned_untrusted_.exchange(true))
      log_warning("not loading cache entry " + path +
                  ": it is not a regular file owned by this user and writable only by them (the kernel will be "
                  "recompiled; further untrusted entries are skipped without a warning)");
    return std::nullopt;
  }

  std::string problem;
  std::string payload;
  unsigned char header[kHeaderSize];
  if (static_cast<uint64_t>(status.st_size) < kHeaderSize || !read_all(descriptor, header, kHeaderSize)) {
    problem = "shorter than its header";
  } else if (std::memcmp(header, kMagic, sizeof(kMagic)) != 0) {
    problem = "bad magic";
  } else if (get_u32(header + 4) != kFormatVersion) {
    problem = "format version " + std::to_string(get_u32(header + 4)) + ", expected " + std::to_string(kFormatVersion);
  } else if (get_u64(header + 8) != static_cast<uint64_t>(status.st_size) - kHeaderSize) {
    problem = "payload size " + std::to_string(get_u64(header + 8)) + " but file holds " +
              std::to_string(static_cast<uint64_t>(status.st_size) - kHeaderSize);
  } else {
    payload.resize(get_u64(header + 8));
    if (!read_all(descriptor, &payload[0], payload.size())) {
      problem = "truncated while reading";
    } else if (checksum64(payload.data(), payload.size()) != get_u64(header + 16)) {
      problem = "checksum mismatch";
    }
  }
  ::close(descriptor);
  if (problem.empty()) {
    // Recency for the size limit's least-recently-used order; failure (a read-only folder) only costs that.
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
    return payload;
  }

  // Delete it unless another writer has already renamed a fresh entry into place since we opened it.
  struct stat current;
  if (::lstat(path.c_str(), &current) == 0 && current.st_ino == status.st_ino && current.st_dev == status.st_dev)
    ::unlink(path.c_str());
  stats().cache_entries_discarded++;
  if (log_enabled(LogLevel::Info))
    log_message(LogLevel::Info, "discarded corrupt cache entry " + path + " (" + problem + "); it will be rebuilt");
  return std::nullopt;
}

bool DiskStore::store(const std::string& key, const std::string& payload) {
  if (!enabled() || !valid_key(key)) return false;
  const std::string shard_path = directory_ + "/" + shard_name(key);
  const std::string temporary_path = shard_path + "/" + temporary_name(key);

  unsigned char header[kHeaderSize];
  std::memcpy(header, kMagic, sizeof(kMagic));
  put_u32(header + 4, kFormatVersion);
  put_u64(header + 8, payload.size());
  put_u64(header + 16, checksum64(payload.data(), payload.size()));

  int descriptor = -1;
  for (int attempt = 0; attempt < 2 && descriptor < 0; ++attempt) {
    descriptor = ::open(temporary_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (descriptor < 0 && errno == ENOENT && attempt == 0) {
      std::string why;  // shard (or the whole cache folder) missing: create it and try once more
      if (!make_directories(shard_path, &why)) {
        disable(why);
        return false;
      }
    }
  }
  if (descriptor < 0) {
    disable("cannot create '" + temporary_path + "': " + error_text(errno));
    return false;
  }
  bool written = write_all(descriptor, header, kHeaderSize) && write_all(descriptor, payload.data(), payload.size());
  int write_error = errno;
  if (::close(descriptor) != 0 && written) {
    written = false;
    write_error = errno;
  }
  if (!written) {
    ::unlink(temporary_path.c_str());
    disable("cannot write '" + temporary_path + "': " + error_text(write_error));
    return false;
  }
  if (::rename(temporary_path.c_str(), entry_path(key).c_str()) != 0) {
    int rename_error = errno;
    ::unlink(temporary_path.c_str());
    disable("cannot rename into '" + entry_path(key) + "': " + error_text(rename_error));
    return false;
  }
  keep_within_limit(kHeaderSize + payload.size());
  return true;
}

void DiskStore::set_size_limit(uint64_t bytes) { size_limit_.store(bytes, std::memory_order_relaxed); }
uint64_t DiskStore::size_limit() const { return size_limit_.load(std::memory_order_relaxed); }

namespace {
struct EntryFile {
  std::string path;
  uint64_t bytes;
  int64_t used_seconds;
  int64_t used_nanoseconds;
};

std::vector<EntryFile> entry_files(const std::string& directory) {
  std::vector<EntryFile> files;
  for_each_shard_file(directory, [&](const std::string& shard_path, const std::string& file) {
    if (file[0] == '.' || !ends_with(file, kEntrySuffix)) return;
    std::string path = shard_path + "/" + file;
    struct stat status;
    if (::lstat(path.c_str(), &status) != 0 || !S_ISREG(status.st_mode)) return;
    files.push_back({std::move(path), uint64_t(status.st_size), int64_t(status.st_mtim.tv_sec),
                     int64_t(status.st_mtim.tv_nsec)});
  });
  return files;
}
}  // namespace

uint64_t DiskStore::total_bytes() const {
  uint64_t total = 0;
  if (directory_.empty()) return total;
  for (const EntryFile& file : entry_files(directory_)) total += file.bytes;
  return total;
}

DiskStore::PruneResult DiskStore::prune(uint64_t target_bytes) {
  PruneResult result;
  if (directory_.empty()) return result;
  std::vector<EntryFile> files = entry_files(directory_);
  for (const EntryFile& file : files) result.remaining += file.bytes;
  result.entries = files.size();
  std::sort(files.begin(), files.end(), [](const EntryFile& a, const EntryFile& b) {
    return a.used_seconds != b.used_seconds ? a.used_seconds < b.used_seconds
                                            : a.used_nanoseconds < b.used_nanoseconds;
  });
  for (const EntryFile& file : files) {
    if (result.remaining <= target_bytes) break;
    // Another process may have removed it first: the bytes are gone either way.
    if (::unlink(file.path.c_str()) == 0) {
      ++result.removed;
      result.freed += file.bytes;
    }
    result.remaining -= file.bytes;
    --result.entries;
  }
  if (result.removed && log_enabled(LogLevel::Info))
    log_message(LogLevel::Info, "kernel cache " + directory_ + ": removed " + std::to_string(result.removed) +
                                    " least recently used entries (" + std::to_string(result.freed) +
                                    " bytes) to stay within its size limit");
  return result;
}

void DiskStore::keep_within_limit(uint64_t stored_bytes) {
  uint64_t limit = size_limit();
  if (limit == 0) return;
  std::lock_guard<std::mutex> lock(size_mutex_);
  // One scan per process, then this process's own stores are added up; other processes' stores are seen at
  // the next scan, which any store that crosses the limit makes.
  if (estimated_bytes_ < 0) estimated_bytes_ = int64_t(total_bytes());
  else estimated_bytes_ += int64_t(stored_bytes);
  if (uint64_t(estimated_bytes_) <= limit) return;
  estimated_bytes_ = int64_t(prune(limit / 10 * 9).remaining);
}

std::vector<std::string> DiskStore::keys() const {
  std::vector<std::string> result;
  if (directory_.empty()) return result;
  for_each_shard_file(directory_, [&](const std::string& shard_path, const std::string& file) {
    if (file[0] == '.' || !ends_with(file, kEntrySuffix)) return;
    std::string key = file.substr(0, file.size() - std::strlen(kEntrySuffix));
    if (valid_key(key) && shard_path.compare(shard_path.size() - 2, 2, shard_name(key)) == 0) result.push_back(key);
  });
  std::sort(result.begin(), result.end());
  return result;
}

size_t DiskStore::entry_count() const { return keys().size(); }

void DiskStore::clear() {
  if (directory_.empty()) return;
  for_each_shard_file(
      directory_,
      [](const std::string& shard_path, const std::string& file) {
        bool entry = file[0] != '.' && ends_with(file, kEntrySuffix);
        bool temporary = file[0] == '.' && ends_with(file, kTemporarySuffix);
        if (entry || temporary) ::unlink((shard_path + "/" + file).c_str());
      },
      /*remove_empty_shards=*/true);
}

}  // namespace metajit
