#include "runtime/linked_kernels.h"

#include <dlfcn.h>

#include <mutex>
#include <unordered_map>

#include "jit/loader/elf_linker.h"
#include "jit/loader/executable_memory.h"

namespace metajit {
namespace {

// The runtime's own linker state; the JIT's object loader keeps another, so a process running both (Python
// with mj.load_exported) links each object where its own code expects it.
struct RuntimeLinker {
  std::mutex mutex;  // the arena and the symbol table are not thread-safe
  ExecutableArena arena;
  std::unordered_map<std::string, uint64_t> symbols;  // the runtime support's helpers, then the process's
  uint64_t resolve(const std::string& name) {
    auto found = symbols.find(name);
    if (found != symbols.end()) return found->second;
    auto address = uint64_t(reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, name.c_str())));
    if (address) symbols.emplace(name, address);
    return address;
  }
};

RuntimeLinker& linker() {
  static RuntimeLinker* instance = new RuntimeLinker();  // never destroyed: linked code outlives static teardown
  return *instance;
}

KernelFunction link(RuntimeLinker& state, const std::string& object, const std::string& symbol,
                    const std::string& where, const std::string& what) {
  std::string unsupported;
  void* address = link_elf_object(
      object, symbol, state.arena, [&](const std::string& name) { return state.resolve(name); }, &unsupported);
  if (!address)
    throw ArtifactError(where + ": cannot link " + what + " (" + unsupported +
                        "); the C++ runtime links only what metajit's own linker takes");
  return reinterpret_cast<KernelFunction>(address);
}

}  // namespace

std::vector<KernelFunction> link_artifact_kernels(const Artifact& artifact, const std::string& where) {
  RuntimeLinker& state = linker();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!artifact.runtime_support.empty()) {
    // Its kernel function fills a table with its helpers' addresses; kernels linked after find them by name.
    bool linked = true;
    for (const std::string& symbol : artifact.runtime_support_symbols) linked = linked && state.symbols.count(symbol);
    if (!linked) {
      KernelFunction fill_table =
          link(state, artifact.runtime_support, artifact.kernel_symbol, where, "the runtime support object");
      std::vector<void*> table(artifact.runtime_support_symbols.size(), nullptr);
      void* const buffers[1] = {table.data()};
      fill_table(buffers, 0, 1);
      for (size_t index = 0; index < table.size(); ++index)
        if (table[index])
          state.symbols[artifact.runtime_support_symbols[index]] = uint64_t(reinterpret_cast<uintptr_t>(table[index]));
    }
  }
  std::vector<KernelFunction> functions;
  for (size_t index = 0; index < artifact.objects.size(); ++index)
    functions.push_back(
        link(state, artifact.objects[index], artifact.kernel_symbol, where, "kernel object " + std::to_string(index)));
  return functions;
}

}  // namespace metajit
