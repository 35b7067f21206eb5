// The prelude a generated C++ kernel starts with: integer typedefs, then those of the libm declarations,
// vectorisable exp/log, float16 conversions, floor division, order keys and vector helpers that its body uses.
// Kernels include no system header, which keeps in-process compiles fast; the prelude is part of the source and
// so of each kernel's cache key.
#pragma once
#include <string>

namespace metajit {

// `body`: the kernel source after the prelude.
std::string cpp_prelude_for(const std::string& body);

}  // namespace metajit
