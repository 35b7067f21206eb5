// Tests for the C++ scheduling passes (jit/ir/ir_passes.h and the pass files it lists): each recognises the
// kernel shape it is for, and leaves a near miss alone; the parallel grain counts the work items of the form
// chosen. The renderer's text for each form is checked by the Python suite (the kernels' digests and results).
#include <gtest/gtest.h>

#include <string>

#include "jit/ir/column_sums.h"
#include "jit/ir/ir_passes.h"
#include "jit/ir/parallel_grain.h"
#include "jit/ir/running_sums.h"
#include "jit/ir/transposed_tiles.h"

namespace metajit {
namespace {

IrExprPtr variable(const std::string& name, int64_t extent) { return ir_loop_variable(name, extent); }
IrExprPtr add(IrExprPtr left, IrExprPtr right) { return ir_index(IndexOperator::Add, left, right); }
IrExprPtr multiply(IrExprPtr left, int64_t factor) { return ir_index(IndexOperator::Multiply, left, ir_int(factor)); }

IrKernel pointwise(Shape domain, Shape input) {
  IrKernel kernel;
  kernel.buffers = {IrBuffer::output("out0", DType::Float32, domain), IrBuffer::input("in1", DType::Float32, input)};
  kernel.domain = domain;
  return kernel;
}

// out0[i0, i1] = in1[i1, i0] over [rows, columns].
IrKernel transpose(int64_t rows, int64_t columns) {
  IrKernel kernel = pointwise({rows, columns}, {columns, rows});
  IrExprPtr i0 = variable("i0", rows), i1 = variable("i1", columns);
  kernel.body = {
      IrStatement::store(0, add(multiply(i0, columns), i1), ir_load(1, DType::Float32, add(multiply(i1, rows), i0)))};
  return kernel;
}

TEST(IrPassesTest, TransposeIsWalkedInTiles) {
  IrKernel kernel = transpose(64, 128);
  run_cpu_scheduling_passes(kernel);
  EXPECT_EQ(kernel.schedule.form, IrSchedule::Form::TransposedTiles);
  EXPECT_EQ(kernel.schedule.across, 0);
  EXPECT_EQ(kernel.schedule.tile, 16);
  EXPECT_EQ(kernel.schedule.work_items, (64 / 16) * (128 / 16));
  EXPECT_EQ(kernel.schedule.grain, 32768 / (16 * 16));
  EXPECT_EQ(transposed_tile_loads(kernel, 16).size(), 1u);
}

TEST(IrPassesTest, ContiguousCopyIsWalkedByElements) {
  IrKernel kernel = pointwise({64, 128}, {64, 128});
  IrExprPtr offset = add(multiply(variable("i0", 64), 128), variable("i1", 128));
  kernel.body = {IrStatement::store(0, offset, ir_load(1, DType::Float32, offset))};
  run_cpu_scheduling_passes(kernel);
  EXPECT_EQ(kernel.schedule.form, IrSchedule::Form::Elements);
  EXPECT_EQ(kernel.schedule.work_items, 64 * 128);
  EXPECT_EQ(kernel.schedule.grain, 32768);
}

// out0[i0] = sum over r0 of in1[r0, i0]: each term a row further on.
IrKernel column_sum(int64_t rows, int64_t columns) {
  IrKernel kernel = pointwise({columns}, {rows, columns});
  IrExprPtr i0 = variable("i0", columns), r0 = variable("r0", rows);
  kernel.inner_work = rows;
  kernel.body = {IrStatement::reduce_loop("sum_0", DType::Float32, ReduceOp::Add, {{"r0", rows}},
                                          ir_load(1, DType::Float32, add(multiply(r0, columns), i0))),
                 IrStatement::store(0, i0, ir_variable("sum_0", DType::Float32))};
  return kernel;
}

TEST(IrPassesTest, SumOverRowsIsAColumnSum) {
  IrKernel kernel = column_sum(2048, 1024);
  run_cpu_scheduling_passes(kernel);
  EXPECT_EQ(kernel.schedule.form, IrSchedule::Form::ColumnSum);
  EXPECT_EQ(kernel.schedule.statement, 0);
  EXPECT_EQ(kernel.schedule.work_items, 1024);
  EXPECT_EQ(kernel.schedule.grain, 256) << "a slice takes at least a chunk of columns";
}

TEST(IrPassesTest, SumAlongTheRowIsNotAColumnSum) {
  IrKernel kernel = pointwise({1024}, {1024, 64});
  IrExprPtr i0 = variable("i0", 1024), r0 = variable("r0", 64);
  kernel.body = {IrStatement::reduce_loop("sum_0", DType::Float32, ReduceOp::Add, {{"r0", 64}},
                                          ir_load(1, DType::Float32, add(multiply(i0, 64), r0))),
                 IrStatement::store(0, i0, ir_variable("sum_0", DType::Float32))};
  choose_column_sums(kernel);
  EXPECT_EQ(kernel.schedule.form, IrSchedule::Form::Elements);
}

// out0[i0, i1] = sum over r1 of (r1 <= i1 ? in1[i0, r1] : 0): cumsum's triangle along the last dim.
IrKernel triangle(bool guarded) {
  IrKernel kernel = pointwise({4, 8}, {4, 8});
  IrExprPtr i0 = variable("i0", 4), i1 = variable("i1", 8), r1 = variable("r1", 8);
  IrExprPtr term = ir_load(1, DType::Float32, add(multiply(i0, 8), r1));
  IrExprPtr kept =
      guarded ? ir_select(ir_index(IndexOperator::LessEqual, r1, i1), term, ir_float(0, DType::Float32)) : term;
  kernel.body = {IrStatement::reduce_loop("sum_0", DType::Float32, ReduceOp::Add, {{"r1", 8}}, kept),
                 IrStatement::store(0, add(multiply(i0, 8), i1), ir_variable("sum_0", DType::Float32))};
  return kernel;
}

TEST(IrPassesTest, TriangleIsARunningSumOverRows) {
  IrKernel kernel = triangle(true);
  run_cpu_scheduling_passes(kernel);
  EXPECT_EQ(kernel.schedule.form, IrSchedule::Form::RunningSum);
  EXPECT_EQ(kernel.schedule.statement, 0);
  EXPECT_EQ(kernel.schedule.work_items, 4);
  EXPECT_EQ(kernel.schedule.grain, 32768 / 8);
}

TEST(IrPassesTest, UnguardedSumIsNotARunningSum) {
  IrKernel kernel = triangle(false);
  choose_running_sums(kernel);
  EXPECT_EQ(kernel.schedule.form, IrSchedule::Form::Elements);
}

TEST(IrPassesTest, LoadsAtLoadedAddressesTakeABiggerGrain) {
  // out0[i0] = in1[in2[i0]]: a gather.
  IrKernel kernel = pointwise({4096}, {4096});
  kernel.buffers.push_back(IrBuffer::input("in2", DType::Int64, {4096}));
  IrExprPtr i0 = variable("i0", 4096);
  kernel.body = {IrStatement::let("index_0", DType::Int64, ir_load(2, DType::Int64, i0)),
                 IrStatement::store(0, i0, ir_load(1, DType::Float32, ir_variable("index_0", DType::Int64)))};
  choose_parallel_grain(kernel);
  EXPECT_EQ(kernel.schedule.work_items, 4096);
  EXPECT_EQ(kernel.schedule.grain, 32768 / 8);
}

}  // namespace
}  // namespace metajit
