// Binding a function of a library loaded with dlopen: the one helper the dlopened vendor libraries (cuBLAS,
// cuDNN, Open MPI, NCCL) share. It must not load libraries or decide what is missing means; callers do.
#pragma once
#include <dlfcn.h>

#include <string>

namespace metajit {

// Points `target` at `library`'s `name`; when there is none, appends the name to `missing` (comma-separated).
template <typename Pointer>
bool bind_symbol(void* library, Pointer& target, const char* name, std::string& missing) {
  target = reinterpret_cast<Pointer>(::dlsym(library, name));
  if (!target) missing += std::string(missing.empty() ? "" : ", ") + name;
  return target != nullptr;
}

}  // namespace metajit
