// Tests for move_constant_offsets_to_launch (jit/ir/launch_offsets.h): after the move, the offset passed at launch
// plus each read's new offset must equal the read's old offset at every loop point, and the source (ir_key of
// the reads) must no longer depend on where the slice starts.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "jit/ir/launch_offsets.h"
#include "tests/cpp/index_ir_evaluator.h"

namespace metajit {
namespace {

IrExprPtr add(IrExprPtr left, IrExprPtr right) { return ir_index(IndexOperator::Add, left, right); }
IrExprPtr multiply(IrExprPtr left, IrExprPtr right) { return ir_index(IndexOperator::Multiply, left, right); }

// out0[i * 8 + j] = in0[reads[0]] + in0[reads[1]] + ... + in1[other]
IrKernel kernel_reading(const std::vector<IrExprPtr>& reads, IrExprPtr other) {
  IrKernel kernel;
  kernel.buffers = {IrBuffer::output("out0", DType::Float32, {4, 8}), IrBuffer::input("in0", DType::Float32, {1000}),
                    IrBuffer::input("in1", DType::Float32, {1000})};
  kernel.domain = {4, 8};
  IrExprPtr value = ir_load(2, DType::Float32, other);
  for (const IrExprPtr& read : reads) value = ir_binary(BinaryOp::Add, DType::Float32, value, ir_load(1, DType::Float32, read));
  kernel.body.push_back(
      IrStatement::store(0, add(multiply(ir_loop_variable("i0", 4), ir_int(8)), ir_loop_variable("i1", 8)), value));
  return kernel;
}

// The (buffer, offset) of every load in `expression`, outermost last.
void collect_loads(const IrExprPtr& expression, std::vector<std::pair<int, IrExprPtr>>& loads) {
  for (const IrExprPtr& argument : expression->args) collect_loads(argument, loads);
  if (expression->kind == IrKind::Load) loads.emplace_back(expression->buffer, expression->args[0]);
}

std::vector<std::pair<int, IrExprPtr>> loads_of(const IrKernel& kernel) {
  std::vector<std::pair<int, IrExprPtr>> loads;
  collect_loads(kernel.body[0].value, loads);
  return loads;
}

TEST(LaunchOffsetsTest, MovedOffsetPlusNewReadEqualsTheOldReadEverywhere) {
  IrExprPtr i = ir_loop_variable("i0", 4), j = ir_loop_variable("i1", 8);
  for (int64_t start : {0, 1, 37, 400}) {
    // x[t][i, j] at t * 64 + i * 8 + j; x[t + 1] shifted by one column, written as (i + 1) * 8 + ... - 7;
    // a product with a constant around a sum with a constant: (i * 8 + j + start) * 1 + 64.
    std::vector<IrExprPtr> reads{
        add(add(multiply(i, ir_int(8)), j), ir_int(start * 64)),
        ir_index(IndexOperator::Subtract, add(add(multiply(add(i, ir_int(1)), ir_int(8)), j), ir_int(start * 64 + 64)),
                 ir_int(7)),
        add(multiply(add(add(multiply(i, ir_int(8)), j), ir_int(start)), ir_int(1)), ir_int(64))};
    IrExprPtr other = add(j, ir_int(5));
    IrKernel before = kernel_reading(reads, other);
    IrKernel after = before;
    std::vector<int64_t> offsets = move_constant_offsets_to_launch(after);
    ASSERT_EQ(offsets.size(), 3u);
    EXPECT_EQ(offsets[0], 0) << "outputs never move";
    EXPECT_EQ(offsets[1], std::min(start * 64, start + 64));
    EXPECT_EQ(offsets[2], 5);
    auto old_loads = loads_of(before), new_loads = loads_of(after);
    ASSERT_EQ(old_loads.size(), new_loads.size());
    for (size_t load = 0; load < old_loads.size(); ++load)
      for (int64_t row = 0; row < 4; ++row)
        for (int64_t column = 0; column < 8; ++column) {
          std::map<std::string, int64_t> point{{"i0", row}, {"i1", column}};
          ASSERT_EQ(offsets[new_loads[load].first] + evaluate(new_loads[load].second, point),
                    evaluate(old_loads[load].second, point))
              << "load " << load << " at start " << start << ": " << ir_key(new_loads[load].second);
        }
  }
}

TEST(LaunchOffsetsTest, TheSourceNoLongerDependsOnWhereTheSliceStarts) {
  IrExprPtr i = ir_loop_variable("i0", 4), j = ir_loop_variable("i1", 8);
  std::string first;
  for (int64_t start : {1, 2, 9}) {
    IrKernel kernel = kernel_reading({add(add(multiply(i, ir_int(8)), j), ir_int(start * 32)),
                                      add(add(multiply(i, ir_int(8)), j), ir_int(start * 32 + 3))},
                                     add(j, ir_int(start)));
    move_constant_offsets_to_launch(kernel);
    std::string text = ir_key(kernel.body[0].value);
    if (first.empty()) first = text;
    EXPECT_EQ(text, first) << "start " << start;
  }
}

TEST(LaunchOffsetsTest, ReadsAtZeroOrBelowAndOpaqueOffsetsStay) {
  IrExprPtr i = ir_loop_variable("i0", 4), j = ir_loop_variable("i1", 8);
  // One read of in0 at offset 0 pins it; in1 is read at (i + 3) % 4 * 8 + j, whose constant sits inside a
  // modulo: nothing to move.
  IrKernel kernel = kernel_reading({add(multiply(i, ir_int(8)), j), add(add(multiply(i, ir_int(8)), j), ir_int(40))},
                                   add(multiply(ir_index(IndexOperator::FloorModulo, add(i, ir_int(3)), ir_int(4)),
                                                ir_int(8)), j));
  std::string before = ir_key(kernel.body[0].value);
  EXPECT_TRUE(move_constant_offsets_to_launch(kernel).empty());
  EXPECT_EQ(ir_key(kernel.body[0].value), before);
}

}  // namespace
}  // namespace metajit
