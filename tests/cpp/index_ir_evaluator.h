// An evaluator of integer index IR for the C++ tests (the kernels' own evaluator is the C++ compiler): loop
// variables take the values given, arithmetic has the index language's floor semantics, comparisons give 0 or 1.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "jit/ir/kernel_ir.h"

namespace metajit {

inline int64_t floor_divide(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
inline int64_t floor_modulo(int64_t a, int64_t b) { return a - floor_divide(a, b) * b; }

inline int64_t evaluate(const IrExprPtr& expression, const std::map<std::string, int64_t>& values) {
  switch (expression->kind) {
    case IrKind::IntConstant: return expression->integer;
    case IrKind::Variable: return values.at(expression->name);
    case IrKind::IndexBinary: {
      int64_t a = evaluate(expression->args[0], values), b = evaluate(expression->args[1], values);
      switch (IndexOperator(expression->op)) {
        case IndexOperator::Add: return a + b;
        case IndexOperator::Subtract: return a - b;
        case IndexOperator::Multiply: return a * b;
        case IndexOperator::FloorDivide: return floor_divide(a, b);
        case IndexOperator::FloorModulo: return floor_modulo(a, b);
        case IndexOperator::Minimum: return std::min(a, b);
        case IndexOperator::Maximum: return std::max(a, b);
        case IndexOperator::Less: return a < b;
        case IndexOperator::LessEqual: return a <= b;
        case IndexOperator::Greater: return a > b;
        case IndexOperator::GreaterEqual: return a >= b;
        default: break;
      }
      break;
    }
    default: break;
  }
  ADD_FAILURE() << "unexpected IR node in an index: " << ir_key(expression);
  return 0;
}

}  // namespace metajit
