// Chooses the compiler backend from the METAJIT_COMPILER environment variable.
// Must not hold backend logic; each backend lives in its own file.
#include "jit/toolchain/compiler.h"

#include "core/flags.h"

namespace metajit {

std::unique_ptr<Compiler> make_default_compiler() {
  // Read at each call (each kernel cache made), not at load: a bad value raises to the caller (core/flags.h).
  if (flag_choice(Flag::Compiler) == "system") return make_system_compiler();
  return make_clang_compiler();
}

}  // namespace metajit
