// Tests for the IR's equality without text (ir_hash, ir_equal in jit/ir/kernel_ir.h), which lowering memoises values
// by and which must agree exactly with ir_key equality, for the written sizes kept on IR nodes (ir_tree_size), and for
// whole-kernel equality (jit/ir/kernel_equality.h), by which the planner renders equal kernels once.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "jit/ir/kernel_equality.h"
#include "jit/ir/kernel_ir.h"

namespace metajit {
namespace {

// Fresh nodes every call, so equal expressions from two calls share no node.
std::vector<IrExprPtr> expressions() {
  IrExprPtr i0 = ir_loop_variable("i0", 8), i1 = ir_loop_variable("i1", 64), r0 = ir_loop_variable("r0", 8);
  IrExprPtr offset = ir_index(IndexOperator::Add, ir_index(IndexOperator::Multiply, i0, ir_int(64)), i1);
  IrExprPtr load = ir_load(1, DType::Float32, offset);
  double nan = std::numeric_limits<double>::quiet_NaN();
  return {
      i0,
      i1,
      r0,
      ir_loop_variable("i0", 9),  // the extent is not part of the key
      ir_int(3),
      ir_int(4),
      ir_int(5000),
      ir_int(-5000),
      ir_bool(true),
      ir_bool(false),
      ir_float(0.0, DType::Float32),
      ir_float(-0.0, DType::Float32),
      ir_float(0.0, DType::Float64),
      ir_float(1.5, DType::Float32),
      ir_float(nan, DType::Float32),
      ir_float(-nan, DType::Float32),
      ir_float(std::nan("7"), DType::Float32),  // another payload: written alike
      ir_variable("add_3", DType::Float32),
      ir_variable("add_4", DType::Float32),
      ir_variable("add_3", DType::Float16),
      offset,
      ir_index(IndexOperator::Add, ir_index(IndexOperator::Multiply, i0, ir_int(64)), r0),
      ir_index(IndexOperator::FloorDivide, offset, ir_int(64)),
      ir_index(IndexOperator::FloorModulo, offset, ir_int(64)),
      load,
      ir_load(2, DType::Float32, offset),
      ir_load(1, DType::Float64, offset),
      ir_binary(BinaryOp::Add, DType::Float32, load, ir_float(1.5, DType::Float32)),
      ir_binary(BinaryOp::Multiply, DType::Float32, load, ir_float(1.5, DType::Float32)),
      ir_binary(BinaryOp::Add, DType::Float32, ir_float(1.5, DType::Float32), load),
      ir_unary(UnaryOp::Exp, DType::Float32, load),
      ir_cast(DType::Float64, load),
      ir_round_to_half(load),
      ir_select(ir_index(IndexOperator::Less, i1, ir_int(32)), load, ir_float(0.0, DType::Float32)),
  };
}

TEST(KernelEqualityTest, IrEqualAndIrHashAgreeWithTheKeyText) {
  std::vector<IrExprPtr> first = expressions(), second = expressions();
  int equal_pairs = 0;
  for (const IrExprPtr& a : first) {
    for (const IrExprPtr& b : second) {
      bool same_key = ir_key(a) == ir_key(b);
      EXPECT_EQ(ir_equal(a, b), same_key) << ir_key(a) << " / " << ir_key(b);
      if (same_key) {
        EXPECT_EQ(ir_hash(a), ir_hash(b)) << ir_key(a);
        ++equal_pairs;
      }
    }
  }
  EXPECT_GT(equal_pairs, int(first.size()));  // each with its twin, and the alike-written pairs besides
}

TEST(KernelEqualityTest, WrittenSizesSaturateAndCopiesAreSizedAfresh) {
  // A chain of shared halves doubles its written size at every step: 2^60 and beyond saturate, never overflow.
  IrExprPtr doubled = ir_loop_variable("i0", 4);
  for (int step = 0; step < 100; ++step) doubled = ir_binary(BinaryOp::Add, DType::Int64, doubled, doubled);
  EXPECT_EQ(ir_tree_size({doubled}, 1001), 1001);
  EXPECT_EQ(ir_tree_size({doubled, doubled}, int64_t(1) << 62), int64_t(1) << 61);
  IrExprPtr small = ir_binary(BinaryOp::Add, DType::Int64, ir_int(1), ir_int(2));
  EXPECT_EQ(ir_tree_size({small}, 1000), 3);
  // Min and max repeat their operands when written.
  EXPECT_EQ(ir_tree_size({ir_index(IndexOperator::Minimum, ir_loop_variable("i0", 4), ir_int(2))}, 1000), 5);
  IrExprPtr copy = ir_with_args(small, {small, small});  // a copy with new operands: sized and hashed again
  EXPECT_EQ(ir_tree_size({copy}, 1000), 7);
  EXPECT_NE(ir_hash(copy), ir_hash(small));
  EXPECT_FALSE(ir_equal(copy, small));
}

IrKernel kernel_with(int64_t reduce_extent, const std::string& fused) {
  IrKernel kernel;
  kernel.domain = {8, 64};
  kernel.buffers = {IrBuffer::output("out0", DType::Float32, {8, 64}), IrBuffer::input("in0", DType::Float32, {8, 64})};
  IrExprPtr i0 = ir_loop_variable("i0", 8), i1 = ir_loop_variable("i1", 64);
  IrExprPtr offset = ir_index(IndexOperator::Add, ir_index(IndexOperator::Multiply, i0, ir_int(64)), i1);
  IrExprPtr r0 = ir_loop_variable("r0", reduce_extent);
  IrExprPtr term =
      ir_load(1, DType::Float32, ir_index(IndexOperator::Add, ir_index(IndexOperator::Multiply, i0, ir_int(64)), r0));
  kernel.body.push_back(
      IrStatement::reduce_loop("sum_0", DType::Float32, ReduceOp::Add, {{"r0", reduce_extent}}, term));
  kernel.body.push_back(IrStatement::store(0, offset, ir_variable("sum_0", DType::Float32)));
  kernel.fused_ops = {fused};
  return kernel;
}

TEST(KernelEqualityTest, KernelsAreEqualOnlyWhenEveryFieldIs) {
  IrKernel kernel = kernel_with(64, "reduce_add  [8, 64]  model.py:3");
  IrKernel same = kernel_with(64, "reduce_add  [8, 64]  model.py:3");
  EXPECT_TRUE(ir_kernels_equal(kernel, same));
  EXPECT_EQ(ir_kernel_hash(kernel), ir_kernel_hash(same));
  // The reduction's loop variable has another extent: ir_equal says its expressions are alike, the kernels differ.
  IrKernel shorter = kernel_with(64, "reduce_add  [8, 64]  model.py:3");
  shorter.body[0].value = kernel_with(32, "").body[0].value;
  EXPECT_TRUE(ir_equal(shorter.body[0].value, kernel.body[0].value));
  EXPECT_FALSE(ir_kernels_equal(kernel, shorter));
  EXPECT_FALSE(ir_kernels_equal(kernel, kernel_with(32, "reduce_add  [8, 64]  model.py:3")));
  EXPECT_FALSE(ir_kernels_equal(kernel, kernel_with(64, "reduce_add  [8, 64]  model.py:4")));  // the header differs
  IrKernel scheduled = same;
  scheduled.schedule.grain = 4;
  EXPECT_FALSE(ir_kernels_equal(kernel, scheduled));
  IrKernel renamed = same;
  renamed.buffers[1].name = "in1";
  EXPECT_FALSE(ir_kernels_equal(kernel, renamed));
}

}  // namespace
}  // namespace metajit
