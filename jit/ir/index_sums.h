// Simplification of index arithmetic seen as a sum of terms (coefficient * atom + constant). Reshapes flatten
// indices and split them again with / and %; the pieces only cancel once the whole sum is in view, e.g.
// (r + (i % 128) * 1000) + (i / 128) * 128000 is r + i * 1000. ir_index calls these, so every index it builds
// is simplified as it is built.
#pragma once
#include <cstdint>
#include <string>

#include "jit/ir/kernel_ir.h"

namespace metajit {

// left + right when its terms combine: x % c * k + x / c * (c * k) -> x * k, x % c * k + (x / c) % m * (c * k)
// -> x % (c * m) * k, equal atoms merge and constants fold. nullptr when nothing combines.
IrExprPtr combine_index_sum(const IrExprPtr& left, const IrExprPtr& right);

// left / divisor or left % divisor (floor semantics, divisor > 1) taken apart over the terms of left: multiples
// of the divisor move to the quotient, and a part below c, where c divides the divisor, drops out:
// (h * c + l) / d == h / (d / c) and (h * c + l) % d == h % (d / c) * c + l for 0 <= l < c. nullptr when no
// rule applies.
IrExprPtr divide_index_sum(IndexOperator op, const IrExprPtr& left, int64_t divisor);

// The coefficient of loop variable `variable` in `expression` (0 when it does not appear); false when the
// variable appears other than linearly (inside a /, a %, a min or max, a load).
bool index_coefficient(const IrExprPtr& expression, const std::string& variable, int64_t* coefficient);

}  // namespace metajit
