// Loads relocatable object files (compiled kernels) into this process through one LLVM ORC LLJIT and hands
// back function addresses. Thread-safe. Loaded code lives until the process exits; this file must not
// compile source, cache anything, or let an LLVM error abort the process (they become std::runtime_error).
#pragma once
#include <memory>
#include <string>

namespace metajit {

class ObjectLoader {
 public:
  static ObjectLoader& instance();  // created on first use, never destroyed

  // Loads the object into a fresh JITDylib (so every kernel may export the same symbol name) whose undefined
  // references resolve against the host process (libm expf, logf, ...), and returns the address of the
  // extern "C" function `symbol`. Throws std::runtime_error naming the problem for a malformed object, a
  // missing symbol or an unresolvable reference.
  void* load(const std::string& object_bytes, const std::string& symbol);

  ObjectLoader(const ObjectLoader&) = delete;
  ObjectLoader& operator=(const ObjectLoader&) = delete;

 private:
  ObjectLoader();
  ~ObjectLoader();
  struct Implementation;
  std::unique_ptr<Implementation> implementation_;
};

}  // namespace metajit
