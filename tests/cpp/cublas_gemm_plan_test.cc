// plan_cublas_gemm (libraries/cuda_contraction_backend.h): how a matrix product's row-major layouts become cuBLAS's
// column-major strided-batched SGEMM. The plan runs here through a plain-loop model of what cuBLAS computes for
// those arguments (including its leading-dimension rules), against the product computed from the layouts
// directly, so every orientation, transpose, padding and broadcast is checked without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "libraries/cuda_contraction_backend.h"

namespace metajit {
namespace {

struct Case {
  std::vector<int64_t> output_dims, output_strides, left_dims, left_strides, right_dims, right_strides;
};

int64_t span(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  int64_t last = 0;
  for (size_t dim = 0; dim < dims.size(); ++dim) last += (dims[dim] - 1) * strides[dim];
  return last + 1;
}

// What cublasSgemmStridedBatched computes, called once per outer batch index as the plan says.
void model_cublas(const CublasGemmPlan& plan, const float* y, const float* z, float* x) {
  ASSERT_GE(plan.x_leading, std::max<int64_t>(1, plan.p));
  ASSERT_GE(plan.y.leading, std::max<int64_t>(1, plan.y.transposed ? plan.r : plan.p));
  ASSERT_GE(plan.z.leading, std::max<int64_t>(1, plan.z.transposed ? plan.q : plan.r));
  int64_t products = 1;
  for (const auto& dim : plan.outer) products *= dim.extent;
  for (int64_t product = 0; product < products; ++product) {
    int64_t rest = product, x_offset = 0, y_offset = 0, z_offset = 0;
    for (size_t dim = plan.outer.size(); dim-- > 0;) {
      int64_t index = rest % plan.outer[dim].extent;
      rest /= plan.outer[dim].extent;
      x_offset += index * plan.outer[dim].x_stride;
      y_offset += index * plan.outer[dim].y_stride;
      z_offset += index * plan.outer[dim].z_stride;
    }
    for (int64_t batch = 0; batch < plan.batch; ++batch) {
      const float* y_matrix = y + y_offset + batch * plan.y_batch_stride;
      const float* z_matrix = z + z_offset + batch * plan.z_batch_stride;
      float* x_matrix = x + x_offset + batch * plan.x_batch_stride;
      for (int64_t column = 0; column < plan.q; ++column)
        for (int64_t row = 0; row < plan.p; ++row) {
          double sum = 0;
          for (int64_t inner = 0; inner < plan.r; ++inner) {
            float left = plan.y.transposed ? y_matrix[inner + row * plan.y.leading] : y_matrix[row + inner * plan.y.leading];
            float right = plan.z.transposed ? z_matrix[column + inner * plan.z.leading]
                                            : z_matrix[inner + column * plan.z.leading];
            sum += double(left) * right;
          }
          x_matrix[row + column * plan.x_leading] = float(sum);
        }
    }
  }
}

// Runs the plan of `layouts` through the model and compares every output element with the product computed
// from the row-major layouts (batch dims of extent 1 in an operand broadcast).
void check(const Case& layouts) {
  MatmulProblem problem;
  problem.output = {0, 0, layouts.output_dims, layouts.output_strides};
  problem.left = {1, 0, layouts.left_dims, layouts.left_strides};
  problem.right = {2, 0, layouts.right_dims, layouts.right_strides};
  std::optional<CublasGemmPlan> plan = plan_cublas_gemm(problem);
  ASSERT_TRUE(plan.has_value());
  std::mt19937 generator(7);
  std::normal_distribution<float> normal;
  std::vector<float> left(span(layouts.left_dims, layouts.left_strides)),
      right(span(layouts.right_dims, layouts.right_strides));
  for (float& value : left) value = normal(generator);
  for (float& value : right) value = normal(generator);
  std::vector<float> output(span(layouts.output_dims, layouts.output_strides), -1000.0f);
  const float* y = plan->y_is_left ? left.data() : right.data();
  const float* z = plan->y_is_left ? right.data() : left.data();
  model_cublas(*plan, y, z, output.data());
  size_t rank = layouts.output_dims.size();
  int64_t count = 1;
  for (int64_t extent : layouts.output_dims) count *= extent;
  int64_t inner = layouts.left_dims[rank - 1];
  for (int64_t flat = 0; flat < count; ++flat) {
    std::vector<int64_t> index(rank);
    int64_t rest = flat;
    for (size_t dim = rank; dim-- > 0;) {
      index[dim] = rest % layouts.output_dims[dim];
      rest /= layouts.output_dims[dim];
    }
    auto offset = [&](const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t row, int64_t column) {
      int64_t position = row * strides[rank - 2] + column * strides[rank - 1];
      for (size_t dim = 0; dim + 2 < rank; ++dim) position += (dims[dim] == 1 ? 0 : index[dim]) * strides[dim];
      return position;
    };
    double expected = 0;
    for (int64_t k = 0; k < inner; ++k)
      expected += double(left[offset(layouts.left_dims, layouts.left_strides, index[rank - 2], k)]) *
                  right[offset(layouts.right_dims, layouts.right_strides, k, index[rank - 1])];
    float actual = output[offset(layouts.output_dims, layouts.output_strides, index[rank - 2], index[rank - 1])];
    ASSERT_NEAR(actual, expected, 1e-4 * (1 + std::abs(expected))) << "output element " << flat;
  }
}

TEST(CublasGemmPlanTest, PlainProduct) { check({{5, 7}, {7, 1}, {5, 3}, {3, 1}, {3, 7}, {7, 1}}); }

TEST(CublasGemmPlanTest, TransposedOperandsAndOutput) {
  check({{5, 7}, {7, 1}, {5, 3}, {1, 5}, {3, 7}, {7, 1}});  // left stored [k, m]
  check({{5, 7}, {7, 1}, {5, 3}, {3, 1}, {3, 7}, {1, 3}});  // right stored [n, k]
  check({{5, 7}, {1, 5}, {5, 3}, {3, 1}, {3, 7}, {7, 1}});  // output stored [n, m]
  check({{5, 7}, {1, 5}, {5, 3}, {1, 5}, {3, 7}, {1, 3}});  // everything transposed
}

TEST(CublasGemmPlanTest, PaddedRowsAndVectors) {
  check({{5, 7}, {9, 1}, {5, 3}, {4, 1}, {3, 7}, {8, 1}});  // rows further apart than their length
  check({{1, 7}, {7, 1}, {1, 3}, {3, 1}, {3, 7}, {7, 1}});  // one row
  check({{5, 1}, {1, 1}, {5, 3}, {3, 1}, {3, 1}, {1, 1}});  // one column
}

TEST(CublasGemmPlanTest, BatchedAndBroadcastBatches) {
  check({{4, 5, 7}, {35, 7, 1}, {4, 5, 3}, {15, 3, 1}, {4, 3, 7}, {21, 7, 1}});
  check({{4, 5, 7}, {35, 7, 1}, {4, 5, 3}, {15, 3, 1}, {1, 3, 7}, {21, 7, 1}});  // right shared by the batch
  check({{4, 5, 7}, {35, 7, 1}, {1, 5, 3}, {15, 3, 1}, {4, 3, 7}, {21, 7, 1}});  // left shared
  // Two batch dims that cannot merge (the right broadcasts along the first only): an outer loop of products.
  check({{2, 3, 5, 7}, {105, 35, 7, 1}, {2, 3, 5, 3}, {45, 15, 3, 1}, {1, 3, 3, 7}, {63, 21, 7, 1}});
  // Batched with a transposed output.
  check({{4, 5, 7}, {35, 1, 5}, {4, 5, 3}, {15, 3, 1}, {4, 3, 7}, {21, 7, 1}});
}

TEST(CublasGemmPlanTest, DeclinesWhatOneSgemmCannotRead) {
  MatmulProblem problem;
  problem.output = {0, 0, {5, 7}, {14, 2}};  // neither output stride is 1
  problem.left = {1, 0, {5, 3}, {3, 1}};
  problem.right = {2, 0, {3, 7}, {7, 1}};
  EXPECT_FALSE(plan_cublas_gemm(problem).has_value());
  problem.output = {0, 0, {5, 7}, {7, 1}};
  problem.left = {1, 0, {5, 3}, {6, 2}};  // no unit stride in the left operand
  EXPECT_FALSE(plan_cublas_gemm(problem).has_value());
  problem.left = {1, 0, {5, 3}, {3, 1}};
  problem.bias = TensorLayout{3, 0, {1, 7}, {7, 1}};  // a bias is left to the epilogue kernel
  EXPECT_FALSE(plan_cublas_gemm(problem).has_value());
}

}  // namespace
}  // namespace metajit
