#include "libraries/nccl_library.h"

#include <dlfcn.h>

#include <stdexcept>
#include <vector>

#include "core/flags.h"
#include "libraries/symbol_binding.h"

namespace metajit {
namespace {

std::vector<std::string>& search_directories() {
  static std::vector<std::string> directories;
  return directories;
}

struct Loaded {
  NcclApi api;
  std::string reason;
};

Loaded load() {
  Loaded loaded;
  std::vector<std::string> candidates;
  if (auto path = flag_text(Flag::Nccl); path && !path->empty()) candidates.push_back(*path);
  for (const std::string& directory : search_directories()) candidates.push_back(directory + "/libnccl.so.2");
  candidates.push_back("libnccl.so.2");
  void* library = nullptr;
  std::string errors;
  for (const std::string& candidate : candidates) {
    library = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library) {
      loaded.api.path = candidate;
      break;
    }
    const char* error = ::dlerror();
    errors += "\n  " + (error ? std::string(error) : candidate);
  }
  if (!library) {
    loaded.reason =
        "NCCL (libnccl.so.2) was not found: `pip install nvidia-nccl-cu13` (or set METAJIT_NCCL to its "
        "path); NCCL carries collectives on CUDA tensors. Looked in:" +
        errors;
    return loaded;
  }
  NcclApi& api = loaded.api;
  std::string missing;
  bind_symbol(library, api.get_version, "ncclGetVersion", missing);
  bind_symbol(library, api.get_unique_id, "ncclGetUniqueId", missing);
  bind_symbol(library, api.comm_init_rank, "ncclCommInitRank", missing);
  bind_symbol(library, api.comm_destroy, "ncclCommDestroy", missing);
  bind_symbol(library, api.comm_abort, "ncclCommAbort", missing);
  bind_symbol(library, api.comm_get_async_error, "ncclCommGetAsyncError", missing);
  bind_symbol(library, api.error_string, "ncclGetErrorString", missing);
  bind_symbol(library, api.all_reduce, "ncclAllReduce", missing);
  bind_symbol(library, api.broadcast, "ncclBroadcast", missing);
  bind_symbol(library, api.all_gather, "ncclAllGather", missing);
  bind_symbol(library, api.reduce_scatter, "ncclReduceScatter", missing);
  if (!missing.empty()) {
    loaded.reason = loaded.api.path + " is not a usable NCCL 2: missing " + missing;
    return loaded;
  }
  if (api.get_version(&api.version) != 0) loaded.reason = "ncclGetVersion failed for " + api.path;
  return loaded;
}

const Loaded& loaded() {
  static const Loaded instance = load();
  return instance;
}

}  // namespace

void add_nccl_search_directory(const std::string& directory) { search_directories().push_back(directory); }

const NcclApi& nccl_api() {
  const Loaded& library = loaded();
  if (!library.reason.empty()) throw std::runtime_error(library.reason);
  return library.api;
}

std::string nccl_unavailable_reason() { return loaded().reason; }

}  // namespace metajit
