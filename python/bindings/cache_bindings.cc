// Bindings of the kernel cache for metajit.cache (bundles, recording, the CLI) and mj.inspect's "cached" field.
// The bundle file format itself is Python's (metajit/cache/bundle.py); C++ only serves its entries.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "var_caster.h"

#include "cache/disk_store.h"
#include "jit/codegen/cpp/cpp_prelude.h"
#include "jit/codegen/cpp/runtime_support.h"
#include "jit/toolchain/kernel_cache.h"
#include "jit/toolchain/kernel_entry.h"
#include "jit/toolchain/target_info.h"

namespace py = pybind11;
using namespace metajit;

void bind_cache(py::module_& module) {
  py::register_exception<MissingKernelError>(module, "MissingKernelError", PyExc_RuntimeError);
  KernelCache& cache = KernelCache::instance();
  module.def("abi_version", [] { return kMetajitAbiVersion; });
  module.def("compiler_identity", [&cache] { return cache.compiler_identity(); });
  module.def("host_cpu_name", &host_cpu_name);
  module.def("host_cpu_features", &host_cpu_features);
  // The source and key of the runtime support object (jit/codegen/cpp/runtime_support.h) kernels call out of line into.
  module.def("runtime_support_source", [] { return cpp_runtime_support().source; });
  module.def("cpp_prelude_for", &cpp_prelude_for);  // the prelude a kernel body naming these helpers gets
  module.def("runtime_support_key", [&cache] { return cache.key_for(cpp_runtime_support().source); });
  module.def("locate_kernel", [&cache](const std::string& key) { return cache.locate(key); });
  module.def("add_bundle_entries", [&cache](const std::vector<std::pair<std::string, py::bytes>>& entries) {
    std::vector<std::pair<std::string, std::string>> copied;
    for (const auto& [key, bytes] : entries) copied.push_back({key, std::string(bytes)});
    cache.add_bundle_entries(copied);
  });
  module.def("clear_bundle_entries", [&cache] { cache.clear_bundle_entries(); });
  module.def("bundle_entry_count", [&cache] { return cache.bundle_entry_count(); });
  module.def("start_recording", [&cache] { return cache.start_recording(); });
  module.def("stop_recording", [&cache](int recording) { return cache.stop_recording(recording); });
  module.def("entry_bytes", [&cache](const std::string& key) -> py::object {
    std::optional<std::string> bytes = cache.entry_bytes(key);
    if (!bytes) return py::none();
    return py::bytes(*bytes);
  });
  module.def("decode_entry", [](const py::bytes& bytes) -> py::object {
    std::optional<KernelEntry> entry = decode_kernel_entry(std::string(bytes));
    if (!entry) return py::none();
    return py::make_tuple(py::bytes(entry->object), entry->source);
  }, "(object, source) of an encoded kernel entry, or None when the bytes are not one.");
  module.def("compile_allowed", [&cache] { return cache.compile_allowed(); });
  module.def("set_compile_allowed", [&cache](bool allowed) { cache.set_compile_allowed(allowed); });
  module.def("dump_dir", [&cache] { return cache.dump_directory(); });
  module.def("set_dump_dir", [&cache](const std::string& directory) { cache.set_dump_directory(directory); });
  // The disk store, for `python -m metajit.cache`.
  module.def("disk_keys", [&cache] { return cache.disk().keys(); });
  module.def("disk_enabled", [&cache] { return cache.disk().enabled(); });
  module.def("disk_load", [&cache](const std::string& key) -> py::object {
    std::optional<std::string> bytes = cache.disk().load(key);  // checks integrity; a corrupt entry is deleted
    if (!bytes) return py::none();
    return py::bytes(*bytes);
  });
  module.def("disk_clear", [&cache] { cache.disk().clear(); });
  module.def("disk_size_limit", [&cache] { return cache.disk().size_limit(); });
  module.def("disk_total_bytes", [&cache] { return cache.disk().total_bytes(); });
  module.def("disk_prune", [&cache](uint64_t target_bytes) {
    DiskStore::PruneResult result = cache.disk().prune(target_bytes);
    py::dict summary;
    summary["removed"] = result.removed;
    summary["freed"] = result.freed;
    summary["entries"] = result.entries;
    summary["remaining"] = result.remaining;
    return summary;
  }, "Removes least recently used entries until the rest take at most target_bytes.");
}
