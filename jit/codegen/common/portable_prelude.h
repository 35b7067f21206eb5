// The kernel helpers whose meaning must be the same on every backend: float16 conversion, the index language's
// floor division and modulo, integer power, NaN-propagating max/min. Each backend's prelude defines
// MJ_FUNCTION (the function qualifiers), MJ_MATH(name) (how a libm function is spelled) and the bit casts
// mj_bits_to_float / mj_float_to_bits, then includes these pieces, so the two backends cannot drift apart.
#pragma once
#include <cstddef>

#include "jit/codegen/common/prelude_selection.h"

namespace metajit {

extern const PreludePiece kPortablePieces[];
extern const size_t kPortablePieceCount;

// The fixed-width integer types, for sources compiled without standard headers (every generated kernel; NVRTC
// has none at all). Each prelude starts with them.
extern const char* const kIntegerTypes;

}  // namespace metajit
