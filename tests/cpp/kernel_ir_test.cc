// Tests for ir_fold_by_ranges, which folds comparisons, min and max by the operands' value ranges
// (jit/ir/kernel_ir.cc): a folded result must equal the unfolded expression at every point of the loop range, and the
// guards and clamps of an index inside one piece of its loop (what the C++ renderer's piece loops rely on) must fold
// away.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "jit/ir/kernel_ir.h"
#include "tests/cpp/index_ir_evaluator.h"

namespace metajit {
namespace {

int64_t direct(IndexOperator op, int64_t a, int64_t b) {
  switch (op) {
    case IndexOperator::Minimum: return std::min(a, b);
    case IndexOperator::Maximum: return std::max(a, b);
    case IndexOperator::Less: return a < b;
    case IndexOperator::LessEqual: return a <= b;
    case IndexOperator::Greater: return a > b;
    default: return a >= b;
  }
}

TEST(KernelIrTest, RangeFoldedComparisonsAndClampsKeepTheirValueEverywhere) {
  const IndexOperator operators[] = {IndexOperator::Minimum, IndexOperator::Maximum, IndexOperator::Less,
                                     IndexOperator::LessEqual, IndexOperator::Greater, IndexOperator::GreaterEqual};
  int folded = 0;
  for (IndexOperator op : operators)
    for (int64_t extent : {1, 4, 9})
      for (int64_t offset = -12; offset <= 12; offset += 3)
        for (int64_t constant = -3; constant <= 12; constant += 1)
          for (bool constant_left : {false, true}) {
            IrExprPtr index = ir_index(IndexOperator::Add, ir_loop_variable("i", extent), ir_int(offset));
            IrExprPtr left = constant_left ? ir_int(constant) : index, right = constant_left ? index : ir_int(constant);
            IrExprPtr result = ir_fold_by_ranges(ir_index(op, left, right));
            bool was_folded = !(result->kind == IrKind::IndexBinary && IndexOperator(result->op) == op);
            folded += was_folded;
            for (int64_t i = 0; i < extent; ++i) {
              int64_t value = i + offset;
              int64_t expected = constant_left ? direct(op, constant, value) : direct(op, value, constant);
              ASSERT_EQ(evaluate(result, {{"i", i}}), expected)
                  << ir_key(result) << " at i = " << i << " (extent " << extent << ", offset " << offset << ")";
            }
          }
  EXPECT_GT(folded, 1000);  // most of these ranges decide the result
}

TEST(KernelIrTest, AGuardAndClampInsideOnePieceFoldAway) {
  // The second piece of a cat along a dim of 768: element = 256 + p, p in [0, 256).
  IrExprPtr element = ir_index(IndexOperator::Add, ir_loop_variable("p", 256), ir_int(256));
  IrExprPtr shifted = ir_index(IndexOperator::Subtract, element, ir_int(256));
  IrExprPtr guard = ir_fold_by_ranges(
      ir_index(IndexOperator::LogicalAnd, ir_index(IndexOperator::GreaterEqual, shifted, ir_int(0)),
               ir_index(IndexOperator::Less, shifted, ir_int(256))));
  ASSERT_EQ(guard->kind, IrKind::IntConstant) << ir_key(guard);
  EXPECT_EQ(guard->integer, 1);
  IrExprPtr clamp = ir_fold_by_ranges(
      ir_index(IndexOperator::Minimum, ir_index(IndexOperator::Maximum, shifted, ir_int(0)), ir_int(255)));
  EXPECT_EQ(clamp, shifted) << ir_key(clamp);
  // The third piece's guard, seen from this piece, is false.
  IrExprPtr other = ir_fold_by_ranges(
      ir_index(IndexOperator::GreaterEqual, ir_index(IndexOperator::Subtract, element, ir_int(512)), ir_int(0)));
  ASSERT_EQ(other->kind, IrKind::IntConstant) << ir_key(other);
  EXPECT_EQ(other->integer, 0);
}

int64_t tensor_arithmetic(BinaryOp op, int64_t a, int64_t b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Subtract: return a - b;
    case BinaryOp::Multiply: return a * b;
    case BinaryOp::FloorDivide: return floor_divide(a, b);
    case BinaryOp::Modulo: return floor_modulo(a, b);
    case BinaryOp::Maximum: return std::max(a, b);
    default: return std::min(a, b);
  }
}

TEST(KernelIrTest, Int64TensorArithmeticRangesHoldEveryValue) {
  // An arange // 2 feeding a gather is tensor arithmetic (IrKind::Binary), not index arithmetic: its range must
  // cover each value it takes, so guards folded by it keep their meaning.
  const BinaryOp operators[] = {BinaryOp::Add, BinaryOp::Subtract, BinaryOp::Multiply, BinaryOp::FloorDivide,
                                BinaryOp::Modulo, BinaryOp::Maximum, BinaryOp::Minimum};
  int bounded = 0;
  for (BinaryOp op : operators)
    for (int64_t offset = -7; offset <= 7; offset += 7)
      for (int64_t constant = -3; constant <= 5; ++constant) {
        if ((op == BinaryOp::FloorDivide || op == BinaryOp::Modulo) && constant == 0) continue;
        IrExprPtr value = ir_binary(op, DType::Int64, ir_index(IndexOperator::Add, ir_loop_variable("i", 9), ir_int(offset)),
                                    ir_int(constant));
        IrRange range = ir_range(value);
        // In unsigned arithmetic: an unbounded range spans all of int64, whose width overflows int64_t.
        bounded += uint64_t(range.high) - uint64_t(range.low) < 1000;
        for (int64_t i = 0; i < 9; ++i) {
          int64_t actual = tensor_arithmetic(op, i + offset, constant);
          EXPECT_TRUE(range.low <= actual && actual <= range.high)
              << ir_key(value) << " = " << actual << " at i = " << i << ", outside [" << range.low << ", " << range.high << "]";
        }
      }
  EXPECT_GT(bounded, 150);  // with a positive divisor or modulus too
  // Narrower integers wrap at their own width: no range is claimed for them.
  IrRange narrow = ir_range(ir_binary(BinaryOp::Add, DType::Int32, ir_cast(DType::Int32, ir_loop_variable("i", 9)), ir_int(1)));
  EXPECT_LT(narrow.low, -1000000);
}

TEST(KernelIrTest, ALetVariableKeepsItsValuesRange) {
  // floor_div_0 = i // 2 with i < 112, named by a let: a clamp to [0, 55] of it folds to the variable itself.
  IrExprPtr value = ir_binary(BinaryOp::FloorDivide, DType::Int64, ir_loop_variable("i", 112), ir_int(2));
  IrExprPtr named = ir_let_variable("floor_div_0", value);
  IrRange range = ir_range(named);
  EXPECT_EQ(range.low, 0);
  EXPECT_EQ(range.high, 55);
  IrExprPtr clamp = ir_fold_by_ranges(
      ir_index(IndexOperator::Minimum, ir_index(IndexOperator::Maximum, named, ir_int(0)), ir_int(55)));
  EXPECT_EQ(clamp, named) << ir_key(clamp);
  // A float let says nothing about ranges.
  IrRange unknown = ir_range(ir_let_variable("x_1", ir_float(1.5, DType::Float32)));
  EXPECT_LT(unknown.low, -1000000);
}

// A reduction loop over r whose Lets are `lets` and whose value is `value` (cumsum's triangle, by hand).
IrStatement reduction_over_r(ReduceOp op, std::vector<IrStatement> lets, IrExprPtr value) {
  return IrStatement::reduce_loop("sum_0", DType::Float32, op, {{"r2", 64}}, std::move(value), std::move(lets));
}

IrStatement let(const std::string& name, DType dtype, IrExprPtr value) {
  return IrStatement::let(name, dtype, std::move(value));
}

TEST(KernelIrTest, RunningSumGuardsAreFoundThroughLetsForTheirIndexOnly) {
  IrExprPtr r = ir_loop_variable("r2", 64), i = ir_loop_variable("i1", 64);
  IrExprPtr term = ir_load(1, DType::Float32, ir_index(IndexOperator::Add, r, ir_int(128)));
  auto triangle = [&](ReduceOp op, IrExprPtr condition, double identity, IrExprPtr kept) {
    return reduction_over_r(op, {let("term_1", DType::Float32, kept), let("in_bounds_2", DType::Bool, condition),
                                 let("reindex_3", DType::Float32,
                                     ir_select(ir_variable("in_bounds_2", DType::Bool),
                                               ir_variable("term_1", DType::Float32), ir_float(identity, DType::Float32)))},
                            ir_variable("reindex_3", DType::Float32));
  };
  IrExprPtr not_greater = ir_index(IndexOperator::Not, ir_index(IndexOperator::Greater, r, i));
  // The three spellings of r <= i, for sums and products.
  for (IrExprPtr condition : {not_greater, ir_index(IndexOperator::LessEqual, r, i),
                              ir_index(IndexOperator::GreaterEqual, i, r)}) {
    EXPECT_TRUE(ir_running_sum_guard(triangle(ReduceOp::Add, condition, 0.0, term), "i1")) << ir_key(condition);
    EXPECT_TRUE(ir_running_sum_guard(triangle(ReduceOp::Multiply, condition, 1.0, term), "i1")) << ir_key(condition);
    EXPECT_FALSE(ir_running_sum_guard(triangle(ReduceOp::Add, condition, 0.0, term), "i0")) << "another index";
  }
  // Not running sums: the wrong identity, a max, r < i's mirror (r >= i), a term that depends on i.
  EXPECT_FALSE(ir_running_sum_guard(triangle(ReduceOp::Multiply, not_greater, 0.0, term), "i1"));
  EXPECT_FALSE(ir_running_sum_guard(triangle(ReduceOp::Maximum, not_greater, 0.0, term), "i1"));
  EXPECT_FALSE(ir_running_sum_guard(triangle(ReduceOp::Add, ir_index(IndexOperator::GreaterEqual, r, i), 0.0, term), "i1"));
  IrExprPtr depends = ir_load(1, DType::Float32, ir_index(IndexOperator::Add, r, i));
  EXPECT_FALSE(ir_running_sum_guard(triangle(ReduceOp::Add, not_greater, 0.0, depends), "i1"));
}

}  // namespace
}  // namespace metajit
