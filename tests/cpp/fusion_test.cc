// End-to-end checks of the C++ layers without Python: builders -> planner -> lowering -> renderer -> JIT.
// Expected values come from plain loops written here, never from metajit itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "core/executor.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "jit/run/graph_executor.h"
#include "meta_ops/broadcast.h"
#include "meta_ops/elementwise.h"
#include "meta_ops/reduce.h"

namespace metajit {
namespace {

class FusionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_op_names();
    install_graph_executor();
  }

  static NodePtr filled(const Shape& shape, float start, float step) {
    NodePtr node = make_data_node(DType::Float32, shape);
    auto* values = static_cast<float*>(node->storage->data());
    for (int64_t index = 0; index < node->numel(); ++index) values[index] = start + step * float(index % 97);
    return node;
  }

  static const float* values_of(const NodePtr& node) {
    sync({node});
    return static_cast<const float*>(node->storage->data());
  }
};

TEST_F(FusionTest, ElementwiseChainIsOneKernel) {
  NodePtr a = filled({64, 33}, -1.0f, 0.02f), b = filled({64, 33}, 0.5f, 0.01f);
  NodePtr y = binary_with_scalar(BinaryOp::Multiply,
                                 unary(UnaryOp::Relu, binary_with_scalar(BinaryOp::Add, binary(BinaryOp::Multiply,
                                                                          unary(UnaryOp::Exp, a), b), 1.0, true, false)),
                                 2.0, true, false);
  EXPECT_EQ(plan_kernels({y}).size(), 1u);
  const float* result = values_of(y);
  const float* in_a = static_cast<const float*>(a->storage->data());
  const float* in_b = static_cast<const float*>(b->storage->data());
  for (int64_t index = 0; index < 64 * 33; ++index) {
    float expected = std::max(std::exp(in_a[index]) * in_b[index] + 1.0f, 0.0f) * 2.0f;
    ASSERT_NEAR(result[index], expected, 1e-5f * std::fabs(expected) + 1e-6f) << index;
  }
  EXPECT_TRUE(y->inputs.empty()) << "a computed node must drop its inputs";
}

TEST_F(FusionTest, ReductionWithProducerAndEpilogueIsOneKernel) {
  NodePtr a = filled({16, 50}, 0.1f, 0.03f), b = filled({16, 50}, -0.4f, 0.01f);
  NodePtr sum = reduce(binary(BinaryOp::Multiply, a, b), ReduceOp::Add, {1}, false);
  NodePtr y = binary_with_scalar(BinaryOp::Multiply, sum, 3.0, true, false);
  EXPECT_EQ(plan_kernels({y}).size(), 1u);
  const float* result = values_of(y);
  const float* in_a = static_cast<const float*>(a->storage->data());
  const float* in_b = static_cast<const float*>(b->storage->data());
  for (int row = 0; row < 16; ++row) {
    double expected = 0;
    for (int column = 0; column < 50; ++column) expected += double(in_a[row * 50 + column]) * in_b[row * 50 + column];
    EXPECT_NEAR(result[row], 3.0 * expected, 1e-4);
  }
}

// One maximum per row, read by every element of its row: computed once per row inside the consumer's kernel.
TEST_F(FusionTest, PerRowReductionRunsInsideItsConsumer) {
  NodePtr x = filled({8, 20}, -2.0f, 0.05f);
  NodePtr maximum = reduce(x, ReduceOp::Maximum, {1}, true);
  NodePtr shifted = binary(BinaryOp::Subtract, x, maximum);
  std::vector<PlannedKernel> kernels = plan_kernels({shifted});
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].lowered.kernel.row_body.size(), 1u);
  const float* result = values_of(shifted);
  const float* input = static_cast<const float*>(x->storage->data());
  for (int row = 0; row < 8; ++row) {
    float row_max = -INFINITY;
    for (int column = 0; column < 20; ++column) row_max = std::max(row_max, input[row * 20 + column]);
    for (int column = 0; column < 20; ++column) EXPECT_FLOAT_EQ(result[row * 20 + column], input[row * 20 + column] - row_max);
  }
}

// One maximum per column: each row would redo the whole reduction, so it gets a kernel of its own.
TEST_F(FusionTest, ReductionNeededAcrossRowsIsMaterialised) {
  NodePtr x = filled({8, 20}, -2.0f, 0.05f);
  NodePtr maximum = reduce(x, ReduceOp::Maximum, {0}, true);
  NodePtr shifted = binary(BinaryOp::Subtract, x, maximum);
  EXPECT_EQ(plan_kernels({shifted}).size(), 2u);
  const float* result = values_of(shifted);
  const float* input = static_cast<const float*>(x->storage->data());
  for (int column = 0; column < 20; ++column) {
    float column_max = -INFINITY;
    for (int row = 0; row < 8; ++row) column_max = std::max(column_max, input[row * 20 + column]);
    for (int row = 0; row < 8; ++row)
      EXPECT_FLOAT_EQ(result[row * 20 + column], input[row * 20 + column] - column_max);
  }
}

TEST_F(FusionTest, ScatterAddWithDuplicateTargets) {
  NodePtr values = filled({10}, 1.0f, 1.0f);
  NodePtr targets = make_data_node(DType::Int64, {10});
  auto* target_data = static_cast<int64_t*>(targets->storage->data());
  const int64_t positions[10] = {0, 2, 2, 1, 0, 3, 3, 3, 9, -1};  // 9 and -1 are outside the output: skipped
  std::memcpy(target_data, positions, sizeof(positions));
  NodePtr y = reindex_reduce(values, ReduceOp::Add, {4}, {"@e0(i0)"}, {}, {targets});
  const float* result = values_of(y);
  float expected[4] = {0, 0, 0, 0};
  for (int index = 0; index < 10; ++index)
    if (positions[index] >= 0 && positions[index] < 4) expected[positions[index]] += float(1 + index);
  for (int index = 0; index < 4; ++index) EXPECT_FLOAT_EQ(result[index], expected[index]);
}

TEST_F(FusionTest, LongChainIsFreedWithoutRecursion) {
  int64_t before = stats().vars_live;
  {
    NodePtr x = filled({4}, 0.0f, 1.0f);
    for (int step = 0; step < 200000; ++step) x = unary(UnaryOp::Negate, x);
  }
  EXPECT_EQ(stats().vars_live.load(), before);
}

TEST(ThreadPoolTest, CoversRangeExactlyOnce) {
  std::vector<std::atomic<int>> hits(100003);
  parallel_for(int64_t(hits.size()), 7, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) hits[index]++;
  });
  for (size_t index = 0; index < hits.size(); ++index) ASSERT_EQ(hits[index].load(), 1) << index;
}

TEST(ThreadPoolTest, PropagatesExceptions) {
  EXPECT_THROW(parallel_for(1000, 1, [](int64_t begin, int64_t) {
                 if (begin == 0) throw std::runtime_error("boom");
               }),
               std::runtime_error);
  int64_t total = 0;
  parallel_for(10, 100, [&](int64_t begin, int64_t end) { total += end - begin; });
  EXPECT_EQ(total, 10);  // the pool still works after an exception
}

TEST(DTypeTest, PromotionFollowsPyTorch) {
  EXPECT_EQ(promote_types(DType::Int32, DType::Int64), DType::Int64);
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int8), DType::Int32);
  EXPECT_EQ(promote_types(DType::Bool, DType::Float16), DType::Float16);
  EXPECT_EQ(promote_types(DType::Int32, OperandKind::Tensor, DType::Float64, OperandKind::Scalar), DType::Float32);
  EXPECT_EQ(promote_types(DType::Float16, OperandKind::Tensor, DType::Float64, OperandKind::Scalar), DType::Float16);
  EXPECT_EQ(promote_types(DType::Bool, OperandKind::Tensor, DType::Int64, OperandKind::Scalar), DType::Int64);
  EXPECT_EQ(promote_types(DType::Int8, OperandKind::Tensor, DType::Int64, OperandKind::Scalar), DType::Int8);
}

TEST_F(FusionTest, GatherSplitsAcrossThreadsSoonerThanAStreamingKernel) {
  // Each gathered element waits on a load at an address it read first, so a gather is split into smaller
  // per-thread pieces than a kernel of as many streaming elements (F.gather of [2048, 16] ran on one thread).
  NodePtr table = filled({256, 64}, 0.0f, 1.0f);
  NodePtr picks = make_data_node(DType::Int64, {256, 16});
  auto* indices = static_cast<int64_t*>(picks->storage->data());
  for (int64_t index = 0; index < 256 * 16; ++index) indices[index] = (index * 37) % 64;
  NodePtr gathered = reindex(table, {256, 16}, {"i0", "@e0(i0, i1)"}, 0.0, {}, {picks});
  NodePtr scaled = binary_with_scalar(BinaryOp::Multiply, filled({256, 16}, 0.0f, 1.0f), 2.0, true, false);
  std::vector<PlannedKernel> gather_plan = plan_kernels({gathered}), streaming_plan = plan_kernels({scaled});
  ASSERT_EQ(gather_plan.size(), 1u);
  ASSERT_EQ(streaming_plan.size(), 1u);
  EXPECT_LT(gather_plan[0].rendered.grain, streaming_plan[0].rendered.grain);
  const float* result = values_of(gathered);
  const float* source = static_cast<const float*>(table->storage->data());
  for (int64_t index = 0; index < 256 * 16; ++index)
    ASSERT_EQ(result[index], source[(index / 16) * 64 + indices[index]]) << index;
}

}  // namespace
}  // namespace metajit
