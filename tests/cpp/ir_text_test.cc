// Tests for the kernel IR's text form (jit/ir/ir_text.h): the whole text of a small kernel (so a change of format
// is a deliberate one), expressions of each kind, and the summary of an expression too large to write out.
#include <gtest/gtest.h>

#include <string>

#include "jit/ir/ir_text.h"

namespace metajit {
namespace {

IrExprPtr row_major(const std::string& row, const std::string& column, int64_t rows, int64_t columns) {
  return ir_index(IndexOperator::Add, ir_index(IndexOperator::Multiply, ir_loop_variable(row, rows), ir_int(columns)),
                  ir_loop_variable(column, columns));
}

// out0[i0, i1] = exp(in1[i0, i1]) / sum over r1 of in1[i0, r1], the sum once per row.
IrKernel softmax_like_kernel() {
  IrKernel kernel;
  kernel.buffers = {IrBuffer::output("out0", DType::Float32, {4, 8}), IrBuffer::input("in1", DType::Float32, {4, 8})};
  kernel.domain = {4, 8};
  kernel.fused_ops = {"exp  [4, 8]  model.py:3"};
  kernel.inner_work = 1;
  kernel.row_work = 8;
  kernel.row_body = {IrStatement::reduce_loop(
      "sum_0", DType::Float32, ReduceOp::Add, {{"r1", 8}},
      ir_unary(UnaryOp::Exp, DType::Float32, ir_variable("term_0", DType::Float32)),
      {IrStatement::let("term_0", DType::Float32, ir_load(1, DType::Float32, row_major("i0", "r1", 4, 8)))})};
  IrExprPtr value = ir_unary(UnaryOp::Exp, DType::Float32, ir_load(1, DType::Float32, row_major("i0", "i1", 4, 8)));
  kernel.body = {IrStatement::let("value_1", DType::Float32, value),
                 IrStatement::store(0, row_major("i0", "i1", 4, 8),
                                    ir_binary(BinaryOp::Divide, DType::Float32, ir_variable("value_1", DType::Float32),
                                              ir_variable("sum_0", DType::Float32)))};
  return kernel;
}

TEST(IrTextTest, WholeKernel) {
  EXPECT_EQ(ir_text(softmax_like_kernel()),
            "kernel pointwise over [4, 8]\n"
            "  output out0: float32 [4, 8]\n"
            "  input in1: float32 [4, 8]\n"
            "  fused exp  [4, 8]  model.py:3\n"
            "  work per point 1, per row 8\n"
            "per row:\n"
            "  reduce sum_0: float32 = add over r1 < 8\n"
            "    let term_0: float32 = in1[(i0 * 8) + r1]\n"
            "    term exp(term_0)\n"
            "per point (i0 < 4, i1 < 8):\n"
            "  let value_1: float32 = exp(in1[(i0 * 8) + i1])\n"
            "  store out0[(i0 * 8) + i1] = div(value_1, sum_0)\n");
}

TEST(IrTextTest, ScheduleShownOnceDecided) {
  IrKernel kernel = softmax_like_kernel();
  kernel.schedule.work_items = 4;
  kernel.schedule.grain = 2;
  EXPECT_NE(ir_text(kernel).find("  schedule elements; 4 work items, grain 2\n"), std::string::npos) << ir_text(kernel);
}

TEST(IrTextTest, ExpressionsOfEachKind) {
  IrExprPtr i = ir_loop_variable("i0", 10);
  EXPECT_EQ(ir_text(ir_index(IndexOperator::Minimum, i, ir_int(3))), "min(i0, 3)");
  EXPECT_EQ(ir_text(ir_index(IndexOperator::Negate, i)), "-i0");
  EXPECT_EQ(ir_text(ir_index(IndexOperator::LessEqual, i, ir_int(4))), "i0 <= 4");
  EXPECT_EQ(ir_text(ir_select(ir_index(IndexOperator::Less, i, ir_int(4)), ir_float(1.5, DType::Float32),
                              ir_float(0, DType::Float64))),
            "(i0 < 4) ? 1.5 : 0.0:float64");
  EXPECT_EQ(ir_text(ir_cast(DType::Float32, ir_load(2, DType::Int64, i))), "float32(buffer2[i0])");
  EXPECT_EQ(ir_text(ir_round_to_half(ir_variable("x", DType::Float32))), "float16(x)");
  EXPECT_EQ(ir_text(ir_bool(true)), "true");
  EXPECT_EQ(ir_text(ir_binary(BinaryOp::Add, DType::Float32, ir_variable("a", DType::Float32),
                              ir_unary(UnaryOp::Negate, DType::Float32, ir_variable("b", DType::Float32)))),
            "add(a, neg(b))");
}

TEST(IrTextTest, LargeSharedExpressionIsSummarised) {
  // Each level uses the one below twice: written out, 2^40 nodes.
  IrExprPtr value = ir_variable("x", DType::Float32);
  for (int level = 0; level < 40; ++level) value = ir_binary(BinaryOp::Add, DType::Float32, value, value);
  EXPECT_EQ(ir_text(value), "<float32 expression of more than 4096 nodes>");
}

}  // namespace
}  // namespace metajit
