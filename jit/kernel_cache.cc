// The kernel cache. A disk entry that fails to load (corrupt object despite a good checksum, or an entry from
// a different build) is discarded and rebuilt, never trusted.
#include "jit/kernel_cache.h"

#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include "cache/content_hash.h"
#include "cache/disk_store.h"
#include "core/log.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "jit/compiler.h"
#include "jit/cpp_renderer.h"
#include "jit/object_loader.h"

namespace metajit {
namespace {

std::string default_directory() {
  if (const char* value = std::getenv("METAJIT_CACHE_DIR")) return value;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return std::string(xdg) + "/metajit";
  if (const char* home = std::getenv("HOME")) return std::string(home) + "/.cache/metajit";
  return "";
}

std::string with_line_numbers(const std::string& source) {
  std::string numbered;
  int line = 1;
  size_t start = 0;
  while (start < source.size()) {
    size_t end = source.find('\n', start);
    if (end == std::string::npos) end = source.size();
    numbered += std::to_string(line++) + ": " + source.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return numbered;
}

}  // namespace

KernelCache& KernelCache::instance() {
  static KernelCache* cache = new KernelCache();  // leaked: kernels stay mapped for the process lifetime
  return *cache;
}

KernelCache::KernelCache() : compiler_(make_default_compiler()), disk_(std::make_unique<DiskStore>(default_directory())) {}

std::string KernelCache::key_for(const std::string& source) const {
  return content_hash(source + "\n//" + compiler_->identity() + "\n//abi=" + std::to_string(kMetajitAbiVersion));
}

std::string KernelCache::directory() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return disk_->directory();
}

void KernelCache::set_directory(const std::string& directory) {
  auto store = std::make_unique<DiskStore>(directory);
  std::lock_guard<std::mutex> lock(mutex_);
  disk_ = std::move(store);
}

void KernelCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mutex_);
  loaded_.clear();
}

bool KernelCache::in_memory(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return loaded_.count(key) != 0;
}

KernelFunction KernelCache::lookup_memory(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = loaded_.find(key);
  return found == loaded_.end() ? nullptr : found->second;
}

KernelFunction KernelCache::get(const std::string& key, const std::string& source, const std::string& header_comment) {
  if (KernelFunction function = lookup_memory(key)) {
    stats().kernel_memory_hits++;
    if (log_enabled(LogLevel::Debug)) log_message(LogLevel::Debug, "kernel " + key + ": memory cache hit");
    return function;
  }
  return load_or_compile(key, source, header_comment);
}

KernelFunction KernelCache::load_or_compile(const std::string& key, const std::string& source,
                                            const std::string& header_comment) {
  DiskStore* disk;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disk = disk_.get();
  }
  if (std::optional<std::string> object = disk->load(key)) {
    try {
      auto function = reinterpret_cast<KernelFunction>(ObjectLoader::instance().load(*object, kKernelSymbol));
      stats().kernels_loaded_from_disk++;
      if (log_enabled(LogLevel::Info)) log_message(LogLevel::Info, "kernel " + key + ": loaded from disk cache");
      std::lock_guard<std::mutex> lock(mutex_);
      loaded_[key] = function;
      return function;
    } catch (const std::exception& error) {
      stats().cache_entries_discarded++;
      log_warning("discarding unusable cache entry " + key + " (" + error.what() + "); rebuilding it");
    }
  }
  auto start = std::chrono::steady_clock::now();
  std::string object;
  try {
    object = compiler_->compile(source);
  } catch (const CompileError& error) {
    throw CompileError(std::string("internal error: generated kernel failed to compile (this is a metajit bug; "
                                   "please report it with this message)\n") +
                       error.what() + "\n--- kernel source ---\n" + header_comment + with_line_numbers(source));
  }
  auto function = reinterpret_cast<KernelFunction>(ObjectLoader::instance().load(object, kKernelSymbol));
  int64_t nanoseconds = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  stats().kernels_compiled++;
  stats().compile_nanoseconds += nanoseconds;
  if (log_enabled(LogLevel::Info))
    log_message(LogLevel::Info, "kernel " + key + ": compiled in " + std::to_string(nanoseconds / 1e6) + " ms");
  if (log_enabled(LogLevel::Debug)) log_message(LogLevel::Debug, header_comment + source);
  disk->store(key, object);
  std::lock_guard<std::mutex> lock(mutex_);
  loaded_[key] = function;
  return function;
}

void KernelCache::prepare(const std::vector<std::pair<std::string, std::string>>& keys_and_sources) {
  std::vector<const std::pair<std::string, std::string>*> missing;
  for (const auto& entry : keys_and_sources)
    if (!lookup_memory(entry.first)) missing.push_back(&entry);
  if (missing.size() < 2) return;  // a single kernel is handled by get()
  parallel_for(int64_t(missing.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) {
      try {
        load_or_compile(missing[index]->first, missing[index]->second, "");
      } catch (...) {
        // get() repeats the attempt on the calling thread and reports the error with full context.
      }
    }
  });
}

}  // namespace metajit
