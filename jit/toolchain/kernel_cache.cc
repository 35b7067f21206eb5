// The kernel cache. A disk or bundle entry that fails to load (corrupt object despite a good checksum, an entry
// from a different build) is discarded and rebuilt, never trusted.
#include "jit/toolchain/kernel_cache.h"

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "cache/content_hash.h"
#include "cache/disk_store.h"
#include "core/flags.h"
#include "core/log.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "jit/codegen/common/kernel_symbol.h"
#include "jit/codegen/cpp/runtime_support.h"
#include "jit/toolchain/compiler.h"
#include "jit/toolchain/kernel_dump.h"
#include "jit/toolchain/kernel_entry.h"
#include "jit/toolchain/object_loader.h"

namespace metajit {
namespace {

std::string default_directory() {
  if (std::optional<std::string> value = flag_text(Flag::CacheDirectory)) return *value;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return std::string(xdg) + "/metajit";
  if (const char* home = std::getenv("HOME")) return std::string(home) + "/.cache/metajit";
  return "";
}

std::unique_ptr<DiskStore> make_disk_store(const std::string& directory) {
  auto store = std::make_unique<DiskStore>(directory);
  store->set_size_limit(flag_size(Flag::CacheMaximumSize));  // raises on a bad value
  return store;
}

}  // namespace

KernelCache& KernelCache::instance() {
  static KernelCache* cache = new KernelCache();  // leaked: kernels stay mapped for the process lifetime
  return *cache;
}

KernelCache::KernelCache() : compiler_(make_default_compiler()), disk_(make_disk_store(default_directory())) {
  if (flag_choice(Flag::Compile) == "never") compile_allowed_ = false;  // raises on a bad value
  if (std::optional<std::string> directory = flag_text(Flag::DumpDirectory)) dump_directory_ = *directory;
  runtime_support_key_ = key_for(cpp_runtime_support().source);
}

std::string KernelCache::key_for(const std::string& source) const {
  static const std::string abi = "\n//abi=" + std::to_string(kMetajitAbiVersion);
  return content_hash({source, "\n//", compiler_->identity(), abi});  // hashed in place: sources are several KB
}

const std::string& KernelCache::compiler_identity() const { return compiler_->identity(); }

std::string KernelCache::directory() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return disk_->directory();
}

void KernelCache::set_directory(const std::string& directory) {
  auto store = make_disk_store(directory);
  std::lock_guard<std::mutex> lock(mutex_);
  disk_ = std::move(store);
}

DiskStore& KernelCache::disk() {
  std::lock_guard<std::mutex> lock(mutex_);
  return *disk_;
}

void KernelCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mutex_);
  loaded_.clear();
  // The support object stays linked (its helpers are not linked again), so its entry must stay at hand for bundles.
  auto support = entries_.find(runtime_support_key_);
  std::shared_ptr<const std::string> support_entry = support == entries_.end() ? nullptr : support->second;
  entries_.clear();
  if (support_entry) entries_[runtime_support_key_] = support_entry;
}

bool KernelCache::in_memory(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return loaded_.count(key) != 0;
}

std::string KernelCache::locate(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (loaded_.count(key)) return "memory";
  if (bundle_.count(key)) return "bundle";
  if (disk_->contains(key)) return "disk";
  return "";
}

void KernelCache::add_bundle_entries(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, entry] : entries) bundle_[key] = entry;
}

void KernelCache::clear_bundle_entries() {
  std::lock_guard<std::mutex> lock(mutex_);
  bundle_.clear();
}

size_t KernelCache::bundle_entry_count() {
  std::lock_guard<std::mutex> lock(mutex_);
  return bundle_.size();
}

int KernelCache::start_recording() {
  std::lock_guard<std::mutex> lock(mutex_);
  int recording = next_recording_++;
  recordings_[recording];
  recording_ = true;
  return recording;
}

std::vector<std::string> KernelCache::stop_recording(int recording) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = recordings_.find(recording);
  if (found == recordings_.end()) return {};
  std::vector<std::string> keys(found->second.begin(), found->second.end());
  recordings_.erase(found);
  recording_ = !recordings_.empty();
  return keys;
}

void KernelCache::note_use(const std::string& key) {  // under mutex_
  for (auto& [recording, keys] : recordings_) {
    keys.insert(key);
    if (runtime_support_linked_) keys.insert(runtime_support_key_);  // the kernel may call into it
  }
}

std::optional<std::string> KernelCache::entry_bytes(const std::string& key) {
  DiskStore* disk;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = entries_.find(key);
    if (found != entries_.end()) return *found->second;
    auto bundled = bundle_.find(key);
    if (bundled != bundle_.end()) return bundled->second;
    disk = disk_.get();
  }
  return disk->load(key);
}

std::optional<std::string> KernelCache::stored_entry(const std::string& key, std::string* origin) {
  DiskStore* disk;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto bundled = bundle_.find(key);
    if (bundled != bundle_.end()) {
      *origin = "bundle";
      if (recording_) note_use(key);
      return bundled->second;
    }
    disk = disk_.get();
  }
  std::optional<std::string> stored = disk->load(key);
  if (stored) {
    *origin = "disk";
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[key] = std::make_shared<const std::string>(*stored);
    if (recording_) note_use(key);
  }
  return stored;
}

void KernelCache::keep_entry(const std::string& key, const std::string& entry) {
  DiskStore* disk;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[key] = std::make_shared<const std::string>(entry);
    if (recording_) note_use(key);
    disk = disk_.get();
  }
  disk->store(key, entry);
}

void KernelCache::set_dump_directory(const std::string& directory) {
  std::lock_guard<std::mutex> lock(mutex_);
  dump_directory_ = directory;
}

std::string KernelCache::dump_directory() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dump_directory_;
}

KernelFunction KernelCache::lookup_memory(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = loaded_.find(key);
  if (found == loaded_.end()) return nullptr;
  if (recording_) note_use(key);
  return found->second;
}

void KernelCache::remember(const std::string& key, KernelFunction function, std::string entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  loaded_[key] = function;
  entries_[key] = std::make_shared<const std::string>(std::move(entry));
  if (recording_) note_use(key);
}

KernelFunction KernelCache::get(const std::string& key, const std::string& source, const std::string& header_comment) {
  if (KernelFunction function = lookup_memory(key)) {
    stats().kernel_memory_hits++;
    if (log_enabled(LogLevel::Debug)) log_message(LogLevel::Debug, "kernel " + key + ": memory cache hit");
    return function;
  }
  return load_or_compile(key, source, header_comment);
}

bool KernelCache::link_runtime_support_for(const std::string& key, const std::string& object) {
  if (key == runtime_support_key_) return false;
  const RuntimeSupport& support = cpp_runtime_support();
  ObjectLoader& loader = ObjectLoader::instance();
  auto calls = [&](bool only_unlinked) {
    for (const std::string& symbol : support.symbols)  // a called helper's name is in the object's string table
      if (object.find(symbol) != std::string::npos && !(only_unlinked && loader.defines(symbol))) return true;
    return false;
  };
  if (!calls(true)) return calls(false);
  std::lock_guard<std::mutex> lock(runtime_support_mutex_);
  if (!calls(true)) return true;  // another thread linked it meanwhile
  KernelFunction fill_table =
      get(runtime_support_key_, support.source, "// metajit runtime support: helpers kernels call out of line\n");
  std::vector<void*> table(support.symbols.size(), nullptr);
  void* const buffers[1] = {table.data()};
  fill_table(buffers, 0, 1);
  for (size_t index = 0; index < table.size(); ++index)
    if (table[index]) loader.define_symbol(support.symbols[index], table[index]);
  runtime_support_linked_ = true;
  return true;
}

void KernelCache::store_runtime_support_on(DiskStore& disk) {
  std::shared_ptr<const std::string> entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = entries_.find(runtime_support_key_);
    if (found != entries_.end()) entry = found->second;
  }
  if (entry && !disk.contains(runtime_support_key_)) disk.store(runtime_support_key_, *entry);
}

// Loads an encoded entry; null (after a warning) when it is unusable, so the caller falls through.
// This run's header and source are what gets dumped: the stored header names the user lines of the program that
// first compiled the kernel.
KernelFunction KernelCache::load_entry(const std::string& key, std::string entry, const char* origin,
                                       const std::string& header_comment, const std::string& source) {
  std::optional<std::string> object = decode_kernel_object(entry);  // the source part stays where it is
  if (object) link_runtime_support_for(key, *object);  // outside the try: its failure is not this entry's
  try {
    if (!object) throw std::runtime_error("not a kernel entry of this metajit version");
    auto function = reinterpret_cast<KernelFunction>(ObjectLoader::instance().load(*object, kKernelSymbol));
    if (log_enabled(LogLevel::Info)) log_message(LogLevel::Info, "kernel " + key + ": loaded from " + origin);
    std::string dump_to = dump_directory();
    if (!dump_to.empty()) dump_kernel(dump_to, key, header_comment + source, *object, origin);
    remember(key, function, std::move(entry));
    return function;
  } catch (const std::exception& error) {
    stats().cache_entries_discarded++;
    log_warning(std::string("discarding unusable ") + origin + " entry " + key + " (" + error.what() + "); rebuilding it");
    return nullptr;
  }
}

KernelFunction KernelCache::load_or_compile(const std::string& key, const std::string& source,
                                            const std::string& header_comment) {
  DiskStore* disk;
  std::optional<std::string> bundled;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disk = disk_.get();
    auto found = bundle_.find(key);
    if (found != bundle_.end()) bundled = found->second;
  }
  if (bundled) {
    if (KernelFunction function = load_entry(key, std::move(*bundled), "bundle", header_comment, source)) {
      stats().kernels_loaded_from_bundle++;
      return function;
    }
  }
  if (std::optional<std::string> stored = disk->load(key)) {
    if (KernelFunction function = load_entry(key, std::move(*stored), "disk cache", header_comment, source)) {
      stats().kernels_loaded_from_disk++;
      return function;
    }
  }
  if (!compile_allowed_) {
    std::string what = header_comment.substr(0, header_comment.find('\n'));
    if (what.rfind("// ", 0) == 0) what = what.substr(3);
    throw MissingKernelError("METAJIT_COMPILE=never, but kernel " + key + " (" + what +
                             ") is in no loaded bundle and not in the cache at " + disk->directory());
  }
  auto start = std::chrono::steady_clock::now();
  KernelEntry entry{compiler_->compile(source), header_comment + source};  // CompileError: the executor reports it
  auto compiled = std::chrono::steady_clock::now();
  bool calls_support = link_runtime_support_for(key, entry.object);  // counted as a kernel of its own if compiled
  auto linking = std::chrono::steady_clock::now();
  auto function = reinterpret_cast<KernelFunction>(ObjectLoader::instance().load(entry.object, kKernelSymbol));
  int64_t nanoseconds = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            (compiled - start) + (std::chrono::steady_clock::now() - linking)).count();
  stats().kernels_compiled++;
  stats().compile_nanoseconds += nanoseconds;
  if (log_enabled(LogLevel::Info))
    log_message(LogLevel::Info, "kernel " + key + ": compiled in " + std::to_string(nanoseconds / 1e6) + " ms");
  if (log_enabled(LogLevel::Debug)) log_message(LogLevel::Debug, header_comment + source);
  std::string dump_to = dump_directory();
  if (!dump_to.empty()) dump_kernel(dump_to, key, entry.source, entry.object, "compiled");
  std::string encoded = encode_kernel_entry(entry);
  disk->store(key, encoded);
  // A cache folder holding a kernel holds what it calls, even when the support was linked from another folder.
  if (calls_support) store_runtime_support_on(*disk);
  remember(key, function, std::move(encoded));
  return function;
}

void KernelCache::prepare(const std::vector<KernelRequest>& requests) {
  std::vector<const KernelRequest*> missing;
  std::unordered_set<std::string> seen;  // a plan may launch one kernel several times (identical layers)
  for (const KernelRequest& request : requests)
    if (seen.insert(request.key).second && !lookup_memory(request.key)) missing.push_back(&request);
  if (missing.size() < 2) return;  // a single kernel is handled by get()
  parallel_for(int64_t(missing.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) {
      try {
        load_or_compile(missing[index]->key, missing[index]->source, missing[index]->header_comment);
      } catch (...) {
        // get() repeats the attempt on the calling thread and reports the error with full context.
      }
    }
  });
}

std::string KernelCache::object_bytes(const std::string& key, const std::string& source,
                                      const std::string& header_comment) {
  get(key, source, header_comment);
  std::optional<std::string> entry = entry_bytes(key);
  std::optional<KernelEntry> decoded = entry ? decode_kernel_entry(*entry) : std::nullopt;
  if (!decoded) throw std::runtime_error("kernel " + key + " compiled but its object is not available");
  return decoded->object;
}

}  // namespace metajit
