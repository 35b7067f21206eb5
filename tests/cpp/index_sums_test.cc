// Tests for the index-sum simplifications ir_index applies (jit/ir/index_sums.cc): the reshape pieces that must
// cancel do, and every rewrite keeps the value. Values are checked by evaluating the simplified IR over every
// point of small loop ranges against the formula computed directly in C++ (floor semantics throughout).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "jit/ir/index_sums.h"
#include "jit/ir/kernel_ir.h"
#include "tests/cpp/index_ir_evaluator.h"

namespace metajit {
namespace {

IrExprPtr add(IrExprPtr a, IrExprPtr b) { return ir_index(IndexOperator::Add, std::move(a), std::move(b)); }
IrExprPtr multiply(IrExprPtr a, int64_t b) { return ir_index(IndexOperator::Multiply, std::move(a), ir_int(b)); }
IrExprPtr divide(IrExprPtr a, int64_t b) { return ir_index(IndexOperator::FloorDivide, std::move(a), ir_int(b)); }
IrExprPtr modulo(IrExprPtr a, int64_t b) { return ir_index(IndexOperator::FloorModulo, std::move(a), ir_int(b)); }

bool mentions_division(const IrExprPtr& expression) {
  if (expression->kind == IrKind::IndexBinary && (IndexOperator(expression->op) == IndexOperator::FloorDivide ||
                                                  IndexOperator(expression->op) == IndexOperator::FloorModulo))
    return true;
  for (const IrExprPtr& argument : expression->args)
    if (mentions_division(argument)) return true;
  return false;
}

// Reading a [16, 128, 1000] tensor as [2048, 1000]: the row index i splits into i / 128 and i % 128, which
// must join again into the contiguous offset r + i * 1000 (cross-entropy over a linear layer's output did 5 ms
// of divisions per call before).
TEST(IndexSumsTest, ReshapeOfAContiguousTensorJoinsBackToItsFlatOffset) {
  IrExprPtr i = ir_loop_variable("i", 2048), r = ir_loop_variable("r", 1000);
  IrExprPtr flat = add(r, multiply(i, 1000));
  IrExprPtr offset = add(add(r, multiply(modulo(divide(flat, 1000), 128), 1000)), multiply(divide(flat, 128000), 128000));
  EXPECT_FALSE(mentions_division(offset)) << ir_key(offset);
  for (int64_t row : {0, 1, 127, 128, 1000, 2047})
    for (int64_t column : {0, 1, 999})
      EXPECT_EQ(evaluate(offset, {{"i", row}, {"r", column}}), column + row * 1000);
}

TEST(IndexSumsTest, SplitPiecesJoinWithAScaleAndAnInnerModulus) {
  IrExprPtr x = ir_loop_variable("x", 5000);
  // x % 7 * 3 + x / 7 * 21 == x * 3, and x % 7 * 3 + (x / 7) % 4 * 21 == x % 28 * 3.
  IrExprPtr joined = add(multiply(modulo(x, 7), 3), multiply(divide(x, 7), 21));
  IrExprPtr wrapped = add(multiply(modulo(x, 7), 3), multiply(modulo(divide(x, 7), 4), 21));
  EXPECT_FALSE(mentions_division(joined)) << ir_key(joined);
  for (int64_t value = 0; value < 5000; ++value) {
    ASSERT_EQ(evaluate(joined, {{"x", value}}), value * 3);
    ASSERT_EQ(evaluate(wrapped, {{"x", value}}), floor_modulo(value, 28) * 3);
  }
}

// (h * c + l) / d and % d for every c dividing d, with l in [0, c) (the rule) and with l reaching past c (no
// rule may fire wrongly), negative coefficients and constants included.
TEST(IndexSumsTest, DivisionOfASumKeepsItsValueEverywhere) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 300; ++trial) {
    int64_t c = 1 + random() % 12, m = 1 + random() % 6, d = c * m;
    int64_t low_extent = 1 + random() % (2 * c);  // sometimes beyond c
    int64_t scale = int64_t(random() % 7) - 3, offset = int64_t(random() % 40) - 20;
    IrExprPtr h = ir_loop_variable("h", 9), l = ir_loop_variable("l", low_extent);
    IrExprPtr sum = add(add(multiply(h, c * (scale == 0 ? 1 : scale)), l), ir_int(offset));
    IrExprPtr quotient = divide(sum, d), remainder = modulo(sum, d);
    for (int64_t hv = 0; hv < 9; ++hv) {
      for (int64_t lv = 0; lv < low_extent; ++lv) {
        int64_t value = hv * c * (scale == 0 ? 1 : scale) + lv + offset;
        std::map<std::string, int64_t> point{{"h", hv}, {"l", lv}};
        ASSERT_EQ(evaluate(quotient, point), floor_divide(value, d)) << ir_key(quotient);
        ASSERT_EQ(evaluate(remainder, point), floor_modulo(value, d)) << ir_key(remainder);
      }
    }
  }
}

TEST(IndexSumsTest, EqualTermsMergeAndNestedDivisionsJoin) {
  IrExprPtr x = ir_loop_variable("x", 100), y = ir_loop_variable("y", 10);
  IrExprPtr merged = add(add(multiply(x, 2), y), add(multiply(x, 3), ir_int(4)));
  IrExprPtr nested = divide(divide(x, 3), 5);
  EXPECT_EQ(ir_key(nested), ir_key(divide(x, 15)));
  for (int64_t xv = 0; xv < 100; ++xv) {
    for (int64_t yv = 0; yv < 10; ++yv) ASSERT_EQ(evaluate(merged, {{"x", xv}, {"y", yv}}), 5 * xv + yv + 4);
    ASSERT_EQ(evaluate(nested, {{"x", xv}}), xv / 15);
  }
}

TEST(IndexSumsTest, CoefficientOfALoopVariable) {
  IrExprPtr i = ir_loop_variable("i", 64), r = ir_loop_variable("r", 32);
  int64_t coefficient = -1;
  ASSERT_TRUE(index_coefficient(add(multiply(r, 1024), i), "i", &coefficient));
  EXPECT_EQ(coefficient, 1);
  ASSERT_TRUE(index_coefficient(add(multiply(r, 1024), i), "r", &coefficient));
  EXPECT_EQ(coefficient, 1024);
  ASSERT_TRUE(index_coefficient(multiply(r, 3), "i", &coefficient));
  EXPECT_EQ(coefficient, 0);
  EXPECT_FALSE(index_coefficient(add(modulo(i, 7), r), "i", &coefficient));
}

}  // namespace
}  // namespace metajit
