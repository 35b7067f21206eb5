// Chooses the compiler backend from the METAJIT_COMPILER environment variable.
// Must not hold backend logic; each backend lives in its own file.
#include "jit/compiler.h"

#include <cstdlib>

namespace metajit {

std::unique_ptr<Compiler> make_default_compiler() {
  const char* choice = std::getenv("METAJIT_COMPILER");
  std::string name = choice ? choice : "";
  if (name.empty() || name == "clang") return make_clang_compiler();
  if (name == "system") return make_system_compiler();
  throw std::invalid_argument("METAJIT_COMPILER='" + name + "' is not a known compiler; use 'clang' (in-process, "
                              "the default) or 'system' (clang++-14 or g++ subprocess)");
}

}  // namespace metajit
