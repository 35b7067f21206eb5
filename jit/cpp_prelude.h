// The fixed prelude every generated C++ kernel starts with: integer typedefs, libm declarations, a
// vectorisable exp/log, float16 conversion and the index language's floor division. Kernels include no system
// header, which keeps in-process compiles fast; the prelude is part of each kernel's cache key.
#pragma once
#include <string>

namespace metajit {

extern const std::string kCppPrelude;

}  // namespace metajit
