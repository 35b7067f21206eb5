// Loads relocatable object files (compiled kernels) into this process with LLVM's RuntimeDyld and hands
// back function addresses. Thread-safe. Loaded code lives until the process exits; this file must not
// compile source, cache anything, or let an LLVM error abort the process (they become std::runtime_error).
#pragma once
#include <memory>
#include <string>

namespace metajit {

enum class LinkPath { Fast, RuntimeDyld };  // which linker took an object (jit/toolchain/elf_linker or LLVM's)

class ObjectLoader {
 public:
  static ObjectLoader& instance();  // created on first use, never destroyed

  // Links the object on its own (so every kernel may export the same symbol name) whose undefined
  // references resolve against the host process (libm expf, logf, ...), and returns the address of the
  // extern "C" function `symbol`. Throws std::runtime_error naming the problem for a malformed object, a
  // missing symbol or an unresolvable reference.
  // `used`, when given, says which linker took the object; `prefer = RuntimeDyld` skips the fast linker
  // (tests compare the two).
  void* load(const std::string& object_bytes, const std::string& symbol, LinkPath* used = nullptr,
             LinkPath prefer = LinkPath::Fast);

  // Names an address that later objects' undefined references resolve to before the host's symbols (the
  // helpers of the runtime support object, jit/codegen/cpp/runtime_support.h).
  void define_symbol(const std::string& name, void* address);
  bool defines(const std::string& name);

  ObjectLoader(const ObjectLoader&) = delete;
  ObjectLoader& operator=(const ObjectLoader&) = delete;

 private:
  ObjectLoader();
  ~ObjectLoader();
  struct Implementation;
  std::unique_ptr<Implementation> implementation_;
};

}  // namespace metajit
