// Tests for the explicit-SIMD row loops of the C++ renderer (jit/codegen/cpp/cpp_renderer.cc with
// jit/codegen/cpp/vector_expression_renderer.cc) on hand-built kernel IR: where a row's kept terms live when two
// outputs read them, and that the compiled kernel computes what std::exp says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "jit/codegen/cpp/cpp_renderer.h"
#include "jit/ir/ir_passes.h"
#include "jit/toolchain/kernel_cache.h"

namespace metajit {
namespace {

using Kernel = void (*)(void* const*, int64_t, int64_t);

constexpr int64_t kRows = 3, kLength = 45;  // 45: two blocks of 2 x 16 lanes do not divide it

// The C++ source of `kernel` after the scheduling passes, as planning renders it.
std::string scheduled_source(IrKernel kernel) {
  run_cpu_scheduling_passes(kernel);
  return render_cpp(kernel).source;
}

// Through the kernel cache, as the executor does: it links the runtime support object the vector exp calls into.
Kernel compile_and_link(const std::string& source) {
  KernelCache& cache = KernelCache::instance();
  return cache.get(cache.key_for(source), source, "// vector_rows_test\n");
}

// A row kernel over [kRows, kLength]: sum = sum_r exp(in0[row, r]) kept per element in sum_0_terms, then
// out0 = term / sum and out1 = term * 2 (out1 stored last).
IrKernel two_output_kernel() {
  IrKernel kernel;
  Shape shape{kRows, kLength};
  kernel.buffers = {IrBuffer::output("out0", DType::Float32, shape), IrBuffer::output("out1", DType::Float32, shape),
                    IrBuffer::input("in0", DType::Float32, shape)};
  kernel.domain = shape;
  auto row_offset = [](const std::string& variable) {
    return ir_index(IndexOperator::Add, ir_loop_variable(variable, kLength),
                    ir_index(IndexOperator::Multiply, ir_loop_variable("i0", kRows), ir_int(kLength)));
  };
  IrStatement sum =
      IrStatement::reduce_loop("sum_0", DType::Float32, ReduceOp::Add, {{"r1", kLength}},
                               ir_unary(UnaryOp::Exp, DType::Float32, ir_load(2, DType::Float32, row_offset("r1"))));
  sum.spill = "sum_0_terms";
  kernel.row_body.push_back(sum);
  IrExprPtr term = ir_variable("sum_0_terms[i1]", DType::Float32);
  IrStatement first = IrStatement::store(
      0, row_offset("i1"), ir_binary(BinaryOp::Divide, DType::Float32, term, ir_variable("sum_0", DType::Float32)));
  IrStatement second = IrStatement::store(
      1, row_offset("i1"), ir_binary(BinaryOp::Multiply, DType::Float32, term, ir_float(2.0, DType::Float32)));
  kernel.body = {first, second};
  return kernel;
}

TEST(VectorRowsTest, TermsLiveInTheOutputStoredLastAndValuesMatchStdExp) {
  IrKernel kernel = two_output_kernel();
  std::string source = scheduled_source(kernel);
  // out0's store is followed by out1's, which reads the terms again: only out1 may hold them.
  EXPECT_NE(source.find("float* const sum_0_terms = &out1["), std::string::npos) << source;
  EXPECT_NE(source.find("mj_float_vector sum_0_lanes[2]"), std::string::npos) << source;
  EXPECT_NE(source.find("mj_exp_lanes(mj_load_vector(&in0["), std::string::npos) << source;

  auto function = compile_and_link(source);
  ASSERT_NE(function, nullptr);
  std::vector<float> input(kRows * kLength), first(input.size(), -1.0f), second(input.size(), -1.0f);
  for (size_t index = 0; index < input.size(); ++index) input[index] = std::sin(float(index)) * 3.0f;
  void* buffers[] = {first.data(), second.data(), input.data()};
  function(buffers, 0, kRows);
  for (int64_t row = 0; row < kRows; ++row) {
    double total = 0;
    for (int64_t column = 0; column < kLength; ++column) total += std::exp(double(input[row * kLength + column]));
    for (int64_t column = 0; column < kLength; ++column) {
      double term = std::exp(double(input[row * kLength + column]));
      EXPECT_NEAR(first[row * kLength + column], term / total, 2e-6 * term / total) << row << ", " << column;
      EXPECT_NEAR(second[row * kLength + column], term * 2, 2e-6 * term * 2) << row << ", " << column;
    }
  }
}

TEST(VectorRowsTest, AStashReadAfterEveryStoreStaysOnTheStack) {
  IrKernel kernel = two_output_kernel();
  // A Let after both stores reads the terms: neither output row may hold them.
  kernel.body.push_back(IrStatement::let("late", DType::Float32, ir_variable("sum_0_terms[i1]", DType::Float32)));
  std::string source = scheduled_source(kernel);
  EXPECT_NE(source.find("alignas(64) float sum_0_terms[45]"), std::string::npos) << source;
}

// Softmax's shape of row kernel over a long constant row: max, then sum of exp(x - max) kept in the output, then
// out0 = term / sum.
IrKernel softmax_kernel(int64_t rows, int64_t length) {
  IrKernel kernel;
  Shape shape{rows, length};
  kernel.buffers = {IrBuffer::output("out0", DType::Float32, shape), IrBuffer::input("in0", DType::Float32, shape)};
  kernel.domain = shape;
  auto row_offset = [&](const std::string& variable) {
    return ir_index(IndexOperator::Add, ir_loop_variable(variable, length),
                    ir_index(IndexOperator::Multiply, ir_loop_variable("i0", rows), ir_int(length)));
  };
  kernel.row_body.push_back(IrStatement::reduce_loop("max_0", DType::Float32, ReduceOp::Maximum, {{"r1", length}},
                                                     ir_load(1, DType::Float32, row_offset("r1"))));
  IrStatement sum = IrStatement::reduce_loop(
      "sum_1", DType::Float32, ReduceOp::Add, {{"r1", length}},
      ir_unary(UnaryOp::Exp, DType::Float32,
               ir_binary(BinaryOp::Subtract, DType::Float32, ir_load(1, DType::Float32, row_offset("r1")),
                         ir_variable("max_0", DType::Float32))));
  sum.spill = "sum_1_terms";
  kernel.row_body.push_back(sum);
  IrExprPtr term = ir_variable("sum_1_terms[i1]", DType::Float32);
  kernel.body = {IrStatement::store(
      0, row_offset("i1"), ir_binary(BinaryOp::Divide, DType::Float32, term, ir_variable("sum_1", DType::Float32)))};
  return kernel;
}

// Fully unrolled, a short constant row's passes read the same addresses, and LLVM kept the first pass's loads
// in (spilled) registers for the second instead of loading again: 3 KB of stack a row and a 20-25% slower
// softmax. Every vector loop of a row reduction must keep its loop.
TEST(VectorRowsTest, RowReductionVectorLoopsAreNotUnrolledAwayAndMatchSoftmax) {
  for (int64_t length : {1024, 1000}) {
    std::string source = scheduled_source(softmax_kernel(2, length));
    int vector_loops = 0;
    for (size_t at = source.find("for (; "); at != std::string::npos; at = source.find("for (; ", at + 1)) {
      size_t line_start = source.rfind('\n', at);
      size_t previous_start = source.rfind('\n', line_start - 1);
      std::string previous = source.substr(previous_start + 1, line_start - previous_start - 1);
      EXPECT_NE(previous.find("#pragma clang loop unroll(disable)"), std::string::npos) << source;
      ++vector_loops;
    }
    // The max pass and the exp-sum pass; a row of 1000 (not a multiple of 64) adds each one's vector tail.
    EXPECT_EQ(vector_loops, length % 64 == 0 ? 2 : 4) << source;

    auto function = compile_and_link(source);
    ASSERT_NE(function, nullptr);
    std::vector<float> input(2 * length), output(input.size(), -1.0f);
    for (size_t index = 0; index < input.size(); ++index) input[index] = std::cos(float(index) * 0.37f) * 20.0f;
    void* buffers[] = {output.data(), input.data()};
    function(buffers, 0, 2);
    for (int64_t row = 0; row < 2; ++row) {
      const float* values = &input[row * length];
      float largest = values[0];
      for (int64_t column = 0; column < length; ++column) largest = std::max(largest, values[column]);
      // The kernel subtracts in float32 (as PyTorch does); exp and the sum are checked in double.
      auto term = [&](int64_t column) { return std::exp(double(values[column] - largest)); };
      double total = 0;
      for (int64_t column = 0; column < length; ++column) total += term(column);
      for (int64_t column = 0; column < length; ++column) {
        double expected = term(column) / total;
        EXPECT_NEAR(output[row * length + column], expected, 2e-6 * expected + 1e-30) << row << ", " << column;
      }
    }
  }
}

}  // namespace
}  // namespace metajit
