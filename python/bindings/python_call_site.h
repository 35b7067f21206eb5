// The place in the running Python code that calls into the extension, as an opaque key for scalar operand sites
// (meta_ops/scalar_sites.h). Defined in module.cc; needs the GIL.
#pragma once
#include <cstdint>

uint64_t python_call_site();
