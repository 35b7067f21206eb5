// Contraction matching and its classification (jit/plan/contraction_matching.h,
// jit/library_call/contraction_patterns.h), and the oneDNN backend end to end (libraries/cpu/onednn_backend.h):
//   * a matrix product (plain and with a transposed right operand) is read as a MatmulProblem with the right
//     dims and element strides;
//   * a strided, padded conv2d written as reindex * broadcast summed (as the Python layer builds it) is read as
//     a forward ConvolutionProblem with the right stride, dilation, padding and layouts;
//   * a reindex with a user overflow condition is not a convolution, and a product summed over a dimension
//     only one operand has is not a matrix product;
//   * with oneDNN installed, a matmul and a conv2d run as one library call each and match plain loops.
// Expected values come from hand computation or plain loops written here, never from metajit itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/executor.h"
#include "core/stats.h"
#include "jit/ir/lowering.h"
#include "jit/library_call/contraction_patterns.h"
#include "jit/plan/contraction_matching.h"
#include "jit/plan/plan_cache.h"
#include "jit/run/graph_executor.h"
#include "libraries/cpu/onednn_backend.h"
#include "meta_ops/broadcast.h"
#include "meta_ops/elementwise.h"
#include "meta_ops/reduce.h"

namespace metajit {
namespace {

class ContractionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_op_names();
    install_graph_executor();
    // Classification tests plan without any library backend; the end-to-end tests install oneDNN themselves.
    saved_backend_ = contraction_backend();
    saved_lowering_enabled_ = library_lowering_enabled();
    set_contraction_backend(nullptr);
  }

  void TearDown() override {
    set_contraction_backend(saved_backend_);
    set_library_lowering_enabled(saved_lowering_enabled_);
  }

  static void use_onednn() {
    install_onednn_backend();
    set_library_lowering_enabled(true);
    PlanCache::instance().clear();  // no plan made without the backend may be replayed
  }

  // Deterministic values of mixed sign in [-1, 1).
  static NodePtr filled(const Shape& shape, int seed) {
    NodePtr node = make_data_node(DType::Float32, shape);
    auto* values = static_cast<float*>(node->storage->data());
    for (int64_t index = 0; index < node->numel(); ++index)
      values[index] = float((index * 37 + seed * 101) % 199) / 99.5f - 1.0f;
    return node;
  }

  static const float* data_of(const NodePtr& node) { return static_cast<const float*>(node->storage->data()); }

  // The matched contraction of the single kernel computing `target`.
  static ContractionMatch match_single_kernel(const NodePtr& target, LoweredKernel* lowered_out = nullptr) {
    std::vector<PlannedKernel> kernels = plan_kernels({target});
    EXPECT_EQ(kernels.size(), 1u) << "expected one fused kernel";
    if (kernels.empty()) return {};
    ContractionMatch match = match_contraction(kernels.front().lowered);
    if (lowered_out) *lowered_out = kernels.front().lowered;
    return match;
  }

  // The kernel buffer that holds `node` (0 is the output, 1.. the inputs), or -1.
  static int buffer_of(const LoweredKernel& lowered, const NodePtr& node) {
    for (size_t position = 0; position < lowered.inputs.size(); ++position)
      if (lowered.inputs[position] == node) return int(position) + 1;
    return -1;
  }

  // a [rows, inner] @ b [inner, columns] as the Python layer writes it.
  static NodePtr matrix_product(const NodePtr& left, const NodePtr& right) {
    int64_t rows = left->shape[0], inner = left->shape[1], columns = right->shape[1];
    NodePtr product = binary(BinaryOp::Multiply, reshape(left, {rows, inner, 1}), reshape(right, {1, inner, columns}));
    return reduce(product, ReduceOp::Add, {1}, false);
  }

  // "i{output}*stride+i{kernel}*dilation-padding" without zero or unit clutter.
  static std::string window_index(int output_dim, int kernel_dim, int64_t stride, int64_t dilation, int64_t padding) {
    std::string text = "i" + std::to_string(output_dim);
    if (stride != 1) text += "*" + std::to_string(stride);
    text += "+i" + std::to_string(kernel_dim);
    if (dilation != 1) text += "*" + std::to_string(dilation);
    if (padding > 0) text += "-" + std::to_string(padding);
    return text;
  }

  // conv2d forward (no bias) as python/metajit/ops/conv.py builds it: x [N, C, H, W], w [O, C/groups, KH, KW];
  // a grouped one reads image channel (o / (O/groups)) * (C/groups) + c.
  static NodePtr convolution_2d(const NodePtr& input, const NodePtr& weight, int64_t stride, int64_t padding,
                                int64_t dilation, const std::vector<std::string>& overflow_conditions = {},
                                int64_t groups = 1) {
    int64_t batch = input->shape[0], height = input->shape[2], width = input->shape[3];
    int64_t channels = weight->shape[1];  // per group
    int64_t out_channels = weight->shape[0], kernel_height = weight->shape[2], kernel_width = weight->shape[3];
    int64_t out_height = (height + 2 * padding - dilation * (kernel_height - 1) - 1) / stride + 1;
    int64_t out_width = (width + 2 * padding - dilation * (kernel_width - 1) - 1) / stride + 1;
    Shape patch_shape{batch, out_channels, out_height, out_width, channels, kernel_height, kernel_width};
    std::string channel = groups == 1 ? "i4"
                                      : "(i1/" + std::to_string(out_channels / groups) + ")*" + std::to_string(channels) + "+i4";
    NodePtr patches = reindex(input, patch_shape,
                              {"i0", channel, window_index(2, 5, stride, dilation, padding),
                               window_index(3, 6, stride, dilation, padding)},
                              0.0, overflow_conditions, {});
    NodePtr weights = broadcast(weight, patch_shape, {0, 2, 3});
    return reduce(binary(BinaryOp::Multiply, patches, weights), ReduceOp::Add, {4, 5, 6}, false);
  }

  // Reference cross-correlation with zero padding; `skip(n, o, oh, ow, c, kh, kw)` drops a term when true.
  template <typename Skip>
  static std::vector<double> reference_convolution(const NodePtr& input, const NodePtr& weight, int64_t stride,
                                                   int64_t padding, int64_t dilation, Skip skip) {
    const int64_t batch = input->shape[0], channels = input->shape[1], height = input->shape[2], width = input->shape[3];
    const int64_t out_channels = weight->shape[0], kernel_height = weight->shape[2], kernel_width = weight->shape[3];
    const int64_t out_height = (height + 2 * padding - dilation * (kernel_height - 1) - 1) / stride + 1;
    const int64_t out_width = (width + 2 * padding - dilation * (kernel_width - 1) - 1) / stride + 1;
    const float* x = data_of(input);
    const float* w = data_of(weight);
    std::vector<double> result(size_t(batch * out_channels * out_height * out_width), 0.0);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t o = 0; o < out_channels; ++o)
        for (int64_t oh = 0; oh < out_height; ++oh)
          for (int64_t ow = 0; ow < out_width; ++ow) {
            double sum = 0;
            for (int64_t c = 0; c < channels; ++c)
              for (int64_t kh = 0; kh < kernel_height; ++kh)
                for (int64_t kw = 0; kw < kernel_width; ++kw) {
                  int64_t row = oh * stride + kh * dilation - padding, column = ow * stride + kw * dilation - padding;
                  if (row < 0 || row >= height || column < 0 || column >= width) continue;
                  if (skip(n, o, oh, ow, c, kh, kw)) continue;
                  sum += double(x[((n * channels + c) * height + row) * width + column]) *
                         double(w[((o * channels + c) * kernel_height + kh) * kernel_width + kw]);
                }
            result[size_t(((n * out_channels + o) * out_height + oh) * out_width + ow)] = sum;
          }
    return result;
  }

  static void expect_close(const float* actual, const std::vector<double>& expected, const char* what) {
    for (size_t index = 0; index < expected.size(); ++index) {
      double tolerance = 1e-3 * std::max(1.0, std::fabs(expected[index]));
      ASSERT_NEAR(actual[index], expected[index], tolerance) << what << " element " << index;
    }
  }

 private:
  ContractionBackend saved_backend_ = nullptr;
  bool saved_lowering_enabled_ = true;
};

TEST_F(ContractionTest, MatmulIsClassifiedWithRowMajorStrides) {
  NodePtr left = filled({8, 16}, 1), right = filled({16, 12}, 2);
  NodePtr output = matrix_product(left, right);
  LoweredKernel lowered;
  ContractionMatch match = match_single_kernel(output, &lowered);
  ASSERT_TRUE(match.contraction.has_value());
  const Contraction& contraction = *match.contraction;
  EXPECT_TRUE(match.materialize.empty());
  EXPECT_FALSE(match.epilogue.has_value());

  // Three loop variables: rows 8, columns 12, inner 16.
  std::vector<int64_t> extents;
  for (const auto& [name, extent] : contraction.extents) extents.push_back(extent);
  std::sort(extents.begin(), extents.end());
  EXPECT_EQ(extents, (std::vector<int64_t>{8, 12, 16})) << contraction.describe();

  std::optional<MatmulProblem> problem = as_matmul(contraction);
  ASSERT_TRUE(problem.has_value()) << contraction.describe();
  const int left_buffer = buffer_of(lowered, left), right_buffer = buffer_of(lowered, right);
  ASSERT_GE(left_buffer, 1);
  ASSERT_GE(right_buffer, 1);
  EXPECT_EQ(problem->left.buffer, left_buffer);
  EXPECT_EQ(problem->right.buffer, right_buffer);
  EXPECT_EQ(problem->output.buffer, 0);
  // left [rows 8, inner 16] row-major; right [inner 16, columns 12] row-major; output [8, 12] row-major.
  EXPECT_EQ(problem->left.dims, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(problem->left.strides, (std::vector<int64_t>{16, 1}));
  EXPECT_EQ(problem->right.dims, (std::vector<int64_t>{16, 12}));
  EXPECT_EQ(problem->right.strides, (std::vector<int64_t>{12, 1}));
  EXPECT_EQ(problem->output.dims, (std::vector<int64_t>{8, 12}));
  EXPECT_EQ(problem->output.strides, (std::vector<int64_t>{12, 1}));
  EXPECT_EQ(problem->left.offset, 0);
  EXPECT_EQ(problem->right.offset, 0);
  EXPECT_EQ(problem->output.offset, 0);
  // A matrix product is not a convolution.
  EXPECT_FALSE(as_convolution(contraction).has_value());
}

TEST_F(ContractionTest, MatmulWithTransposedRightOperandHasTransposedStrides) {
  NodePtr left = filled({8, 16}, 3);
  NodePtr right_storage = filled({12, 16}, 4);  // right[k][n] = right_storage[n][k]
  NodePtr output = matrix_product(left, permute(right_storage, {1, 0}));
  LoweredKernel lowered;
  ContractionMatch match = match_single_kernel(output, &lowered);
  ASSERT_TRUE(match.contraction.has_value());
  std::optional<MatmulProblem> problem = as_matmul(*match.contraction);
  ASSERT_TRUE(problem.has_value()) << match.contraction->describe();
  EXPECT_EQ(problem->left.buffer, buffer_of(lowered, left));
  EXPECT_EQ(problem->right.buffer, buffer_of(lowered, right_storage));
  EXPECT_EQ(problem->left.dims, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(problem->left.strides, (std::vector<int64_t>{16, 1}));
  // Element (k, n) of the transposed view sits at n * 16 + k in the [12, 16] buffer.
  EXPECT_EQ(problem->right.dims, (std::vector<int64_t>{16, 12}));
  EXPECT_EQ(problem->right.strides, (std::vector<int64_t>{1, 16}));
  EXPECT_EQ(problem->output.dims, (std::vector<int64_t>{8, 12}));
  EXPECT_EQ(problem->output.strides, (std::vector<int64_t>{12, 1}));
}

TEST_F(ContractionTest, StridedPaddedConvolutionIsForward) {
  // x [2, 3, 10, 9], w [4, 3, 3, 3], stride 2, padding 1, dilation 1.
  // Output height (10 + 2 - 3) / 2 + 1 = 5, width (9 + 2 - 3) / 2 + 1 = 5.
  // Rows read: from -1 to -1 + 2 * 4 + 2 = 9. Height 10 ends at row 9: padding after 0.
  // Columns read: from -1 to 9 as well; width 9 ends at column 8: padding after 1.
  NodePtr input = filled({2, 3, 10, 9}, 5), weight = filled({4, 3, 3, 3}, 6);
  NodePtr output = convolution_2d(input, weight, 2, 1, 1);
  ASSERT_EQ(output->shape, (Shape{2, 4, 5, 5}));
  LoweredKernel lowered;
  ContractionMatch match = match_single_kernel(output, &lowered);
  ASSERT_TRUE(match.contraction.has_value());
  const Contraction& contraction = *match.contraction;
  EXPECT_TRUE(match.materialize.empty()) << "the padded reindex should be read straight from the input buffer";

  std::optional<ConvolutionProblem> problem = as_convolution(contraction);
  ASSERT_TRUE(problem.has_value()) << contraction.describe();
  EXPECT_EQ(problem->pass, ConvolutionPass::Forward);
  EXPECT_EQ(problem->stride, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(problem->dilation, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(problem->padding_before, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(problem->padding_after, (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(problem->zero_output_first);

  EXPECT_EQ(problem->source.buffer, buffer_of(lowered, input));
  EXPECT_EQ(problem->weights.buffer, buffer_of(lowered, weight));
  EXPECT_EQ(problem->destination.buffer, 0);
  EXPECT_EQ(problem->source.dims, (std::vector<int64_t>{2, 3, 10, 9}));
  EXPECT_EQ(problem->source.strides, (std::vector<int64_t>{270, 90, 9, 1}));
  EXPECT_EQ(problem->source.offset, 0);
  EXPECT_EQ(problem->weights.dims, (std::vector<int64_t>{4, 3, 3, 3}));
  EXPECT_EQ(problem->weights.strides, (std::vector<int64_t>{27, 9, 3, 1}));
  EXPECT_EQ(problem->weights.offset, 0);
  EXPECT_EQ(problem->destination.dims, (std::vector<int64_t>{2, 4, 5, 5}));
  EXPECT_EQ(problem->destination.strides, (std::vector<int64_t>{100, 25, 5, 1}));
  EXPECT_EQ(problem->destination.offset, 0);
}

TEST_F(ContractionTest, GroupedConvolutionSplitsTheOutputChannelIntoGroups) {
  // x [2, 4, 6, 6], w [6, 2, 3, 3], groups 2: each group of 2 image channels makes 3 output channels. The
  // output channel o is read as o / 3 (its group), so the matcher splits it into o / 3 and o % 3.
  NodePtr input = filled({2, 4, 6, 6}, 9), weight = filled({6, 2, 3, 3}, 10);
  NodePtr output = convolution_2d(input, weight, 1, 1, 1, {}, 2);
  ASSERT_EQ(output->shape, (Shape{2, 6, 6, 6}));
  LoweredKernel lowered;
  ContractionMatch match = match_single_kernel(output, &lowered);
  ASSERT_TRUE(match.contraction.has_value());
  const Contraction& contraction = *match.contraction;
  EXPECT_EQ(contraction.extents.count("i1"), 0u) << contraction.describe();
  EXPECT_EQ(contraction.extents.at("i1/"), 2) << contraction.describe();
  EXPECT_EQ(contraction.extents.at("i1%"), 3) << contraction.describe();

  std::optional<ConvolutionProblem> problem = as_convolution(contraction);
  ASSERT_TRUE(problem.has_value()) << contraction.describe();
  EXPECT_EQ(problem->pass, ConvolutionPass::Forward);
  EXPECT_EQ(problem->groups, 2);
  EXPECT_EQ(problem->source.dims, (std::vector<int64_t>{2, 4, 6, 6}));
  EXPECT_EQ(problem->source.strides, (std::vector<int64_t>{144, 36, 6, 1}));
  // [G, O/G, C/G, KH, KW] over w's row-major [6, 2, 3, 3]: group g starts at output channel 3g.
  EXPECT_EQ(problem->weights.dims, (std::vector<int64_t>{2, 3, 2, 3, 3}));
  EXPECT_EQ(problem->weights.strides, (std::vector<int64_t>{54, 18, 9, 3, 1}));
  EXPECT_EQ(problem->destination.dims, (std::vector<int64_t>{2, 6, 6, 6}));
  EXPECT_EQ(problem->destination.strides, (std::vector<int64_t>{216, 36, 6, 1}));
  EXPECT_EQ(problem->padding_before, (std::vector<int64_t>{1, 1}));
}

TEST_F(ContractionTest, TensorPostOpsAreLaidOutAlongTheLibraryDims) {
  // relu((a @ b + bias) * scale) with bias [12] along the columns and scale read transposed from a [12, 8]
  // buffer: three folds (longest first); the longest is a bias, a multiply by [8, 12] at strides (1, 8), a ReLU.
  NodePtr left = filled({8, 16}, 13), right = filled({16, 12}, 14), bias = filled({12}, 15);
  NodePtr scale_storage = filled({12, 8}, 16);
  NodePtr biased = binary(BinaryOp::Add, matrix_product(left, right), broadcast(bias, {8, 12}, {0}));
  NodePtr output = unary(UnaryOp::Relu, binary(BinaryOp::Multiply, biased, permute(scale_storage, {1, 0})));
  LoweredKernel lowered;
  ContractionMatch match = match_single_kernel(output, &lowered);
  ASSERT_TRUE(match.contraction.has_value());
  ASSERT_EQ(match.folds.size(), 3u);
  EXPECT_FALSE(match.folds[0].epilogue.has_value());
  EXPECT_TRUE(match.folds[2].epilogue.has_value());  // the bias alone: the epilogue multiplies and clamps
  std::optional<MatmulProblem> problem = as_matmul(match.folds[0].contraction);
  ASSERT_TRUE(problem.has_value()) << match.folds[0].contraction.describe();
  ASSERT_TRUE(problem->bias.has_value());
  EXPECT_EQ(problem->bias->buffer, buffer_of(lowered, bias));
  EXPECT_EQ(problem->bias->dims, (std::vector<int64_t>{1, 12}));
  EXPECT_EQ(problem->bias->strides[1], 1);
  ASSERT_EQ(problem->post_ops.size(), 2u);
  EXPECT_EQ(problem->post_ops[0].op.kind, PostOp::Kind::Multiply);
  ASSERT_TRUE(problem->post_ops[0].operand.has_value());
  EXPECT_EQ(problem->post_ops[0].operand->buffer, buffer_of(lowered, scale_storage));
  EXPECT_EQ(problem->post_ops[0].operand->dims, (std::vector<int64_t>{8, 12}));
  EXPECT_EQ(problem->post_ops[0].operand->strides, (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(problem->post_ops[1].op.kind, PostOp::Kind::Relu);

  // A convolution's output times a per-channel scale, plus a residual shared by all channels ([2, 1, 6, 6]).
  NodePtr input = filled({2, 3, 6, 6}, 17), weight = filled({4, 3, 3, 3}, 18), channel_scale = filled({4}, 19);
  NodePtr residual = filled({2, 1, 6, 6}, 20);
  NodePtr convolution = convolution_2d(input, weight, 1, 1, 1);
  NodePtr scaled = binary(BinaryOp::Multiply, convolution, broadcast(channel_scale, {2, 4, 6, 6}, {0, 2, 3}));
  NodePtr shifted = binary(BinaryOp::Add, scaled, broadcast(reshape(residual, {2, 6, 6}), {2, 4, 6, 6}, {1}));
  ContractionMatch convolution_match = match_single_kernel(shifted, &lowered);
  ASSERT_EQ(convolution_match.folds.size(), 2u);
  std::optional<ConvolutionProblem> convolution_problem = as_convolution(convolution_match.folds[0].contraction);
  ASSERT_TRUE(convolution_problem.has_value()) << convolution_match.folds[0].contraction.describe();
  EXPECT_FALSE(convolution_problem->bias.has_value());  // a multiply comes first: the add is no bias
  ASSERT_EQ(convolution_problem->post_ops.size(), 2u);
  const std::optional<TensorLayout>& per_channel = convolution_problem->post_ops[0].operand;
  ASSERT_TRUE(per_channel.has_value());
  EXPECT_EQ(per_channel->buffer, buffer_of(lowered, channel_scale));
  EXPECT_EQ(per_channel->dims, (std::vector<int64_t>{1, 4, 1, 1}));
  EXPECT_EQ(per_channel->strides[1], 1);
  const std::optional<TensorLayout>& shared = convolution_problem->post_ops[1].operand;
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(convolution_problem->post_ops[1].op.kind, PostOp::Kind::Add);
  EXPECT_EQ(shared->buffer, buffer_of(lowered, residual));
  EXPECT_EQ(shared->dims, (std::vector<int64_t>{2, 1, 6, 6}));
  EXPECT_EQ(shared->strides[0], 36);
  EXPECT_EQ(shared->strides[2], 6);
  EXPECT_EQ(shared->strides[3], 1);
}

TEST_F(ContractionTest, TensorThatDoesNotNestLikeTheOutputIsNoPostOp) {
  // x [4, 8, 16] @ w [16, 12]: the library merges (batch, row) into 32 rows. A residual read as [8, 4, 12]
  // transposed steps 48 along the inner row and 12 along the outer one, which no stride along the merged rows
  // can say: the matcher still offers the fold, the classification refuses it, the plain product stays.
  NodePtr left = filled({4, 8, 16}, 21), right = filled({16, 12}, 22), storage = filled({8, 4, 12}, 23);
  NodePtr product = reduce(binary(BinaryOp::Multiply, reshape(left, {4, 8, 16, 1}), reshape(right, {1, 1, 16, 12})),
                           ReduceOp::Add, {2}, false);
  NodePtr output = binary(BinaryOp::Add, product, permute(storage, {1, 0, 2}));
  ContractionMatch match = match_single_kernel(output);
  ASSERT_TRUE(match.contraction.has_value());
  ASSERT_EQ(match.folds.size(), 1u);
  EXPECT_FALSE(as_matmul(match.folds[0].contraction).has_value()) << match.folds[0].contraction.describe();
  std::optional<MatmulProblem> plain = as_matmul(*match.contraction);
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->output.dims, (std::vector<int64_t>{32, 12}));
}

TEST_F(ContractionTest, VariableDividedTwoWaysIsNotSplit) {
  // The image channel (o / 3) * 2 + c is read next to a weight at o / 2: no single split makes both affine.
  NodePtr input = filled({2, 4, 6, 6}, 11), weight = filled({3, 2, 3, 3}, 12);
  Shape patch_shape{2, 6, 4, 4, 2, 3, 3};
  NodePtr patches = reindex(input, patch_shape, {"i0", "(i1/3)*2+i4", "i2+i5", "i3+i6"}, 0.0, {}, {});
  NodePtr weights = reindex(weight, patch_shape, {"i1/2", "i4", "i5", "i6"}, 0.0, {}, {});
  NodePtr output = reduce(binary(BinaryOp::Multiply, patches, weights), ReduceOp::Add, {4, 5, 6}, false);
  ContractionMatch match = match_single_kernel(output);
  EXPECT_FALSE(match.contraction.has_value()) << match.contraction->describe();
}

TEST_F(ContractionTest, ReindexWithOverflowConditionIsNotConvolution) {
  NodePtr input = filled({2, 3, 10, 9}, 7), weight = filled({4, 3, 3, 3}, 8);
  // Output rows above 3 read zero: not something a convolution library computes.
  NodePtr output = convolution_2d(input, weight, 2, 1, 1, {"i2 > 3"});
  ContractionMatch match = match_single_kernel(output);
  if (match.contraction) {
    EXPECT_FALSE(as_convolution(*match.contraction).has_value()) << match.contraction->describe();
  }

  // Whatever the planner does with oneDNN installed, the condition must still hold in the result.
  use_onednn();
  for (const PlannedKernel& kernel : plan_kernels({output})) {
    if (kernel.library) {
      EXPECT_EQ(kernel.library->describe().find("convolution"), std::string::npos) << kernel.contraction;
    }
  }
  sync({output});
  std::vector<double> expected = reference_convolution(
      input, weight, 2, 1, 1, [](int64_t, int64_t, int64_t oh, int64_t, int64_t, int64_t, int64_t) { return oh > 3; });
  expect_close(data_of(output), expected, "conditioned convolution");
}

TEST_F(ContractionTest, SumOverOneOperandOnlyIsNotMatmul) {
  // out[i] = sum_jk a[i, j, k] * b[i, k]: j indexes only a.
  NodePtr a = filled({6, 5, 7}, 9), b = filled({6, 7}, 10);
  NodePtr product = binary(BinaryOp::Multiply, a, broadcast(b, {6, 5, 7}, {1}));
  NodePtr output = reduce(product, ReduceOp::Add, {1, 2}, false);
  ContractionMatch match = match_single_kernel(output);
  ASSERT_TRUE(match.contraction.has_value()) << "the product-sum shape is still a contraction";
  EXPECT_FALSE(as_matmul(*match.contraction).has_value()) << match.contraction->describe();
  EXPECT_FALSE(as_convolution(*match.contraction).has_value()) << match.contraction->describe();
}

TEST_F(ContractionTest, OnednnMatmulMatchesLoop) {
  use_onednn();
  const int64_t rows = 64, inner = 96, columns = 80;
  NodePtr left = filled({rows, inner}, 11), right = filled({inner, columns}, 12);
  NodePtr output = matrix_product(left, right);
  std::vector<PlannedKernel> kernels = plan_kernels({output});
  ASSERT_EQ(kernels.size(), 1u);
  ASSERT_NE(kernels[0].library, nullptr) << "not lowered to a library call: " << kernels[0].contraction;
  EXPECT_NE(kernels[0].library->describe().find("matmul"), std::string::npos) << kernels[0].library->describe();

  int64_t calls_before = stats().library_calls.load();
  sync({output});
  EXPECT_EQ(stats().library_calls.load() - calls_before, 1);

  const float* a = data_of(left);
  const float* b = data_of(right);
  std::vector<double> expected(size_t(rows * columns), 0.0);
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t column = 0; column < columns; ++column) {
      double sum = 0;
      for (int64_t k = 0; k < inner; ++k) sum += double(a[row * inner + k]) * double(b[k * columns + column]);
      expected[size_t(row * columns + column)] = sum;
    }
  expect_close(data_of(output), expected, "matmul");
}

// A library call that fails when run, as oneDNN does when it cannot allocate its scratchpad.
class FailingLibraryCall : public LibraryCall {
 public:
  void run(void* const*) const override { throw std::runtime_error("simulated failure: out of scratchpad memory"); }
  std::string describe() const override { return "failing test library (matmul)"; }
};

std::shared_ptr<const LibraryCall> failing_backend(const Contraction&) {
  return std::make_shared<FailingLibraryCall>();
}

Provenance user_line() { return Provenance{intern_string("train.py"), 42}; }

TEST_F(ContractionTest, FailedLibraryCallNamesTheOpAndTheUserLine) {
  set_contraction_backend(&failing_backend);
  set_library_lowering_enabled(true);
  PlanCache::instance().clear();
  set_provenance_hook(&user_line);
  NodePtr left = filled({6, 7}, 3), right = filled({7, 5}, 4);
  NodePtr output = matrix_product(left, right);
  set_provenance_hook(nullptr);
  std::string message;
  try {
    sync({output});
  } catch (const std::exception& error) {
    message = error.what();
  }
  EXPECT_NE(message.find("train.py:42"), std::string::npos) << message;
  EXPECT_NE(message.find("failing test library (matmul)"), std::string::npos) << message;
  EXPECT_NE(message.find("simulated failure: out of scratchpad memory"), std::string::npos) << message;
  EXPECT_NE(message.find(output->op_name()), std::string::npos) << message;
  EXPECT_FALSE(output->is_computed());

  // Nothing is lost: without the failing library the same graph computes the right numbers.
  set_contraction_backend(nullptr);
  PlanCache::instance().clear();
  sync({output});
  const float* a = data_of(left);
  const float* b = data_of(right);
  std::vector<double> expected(30, 0.0);
  for (int64_t row = 0; row < 6; ++row)
    for (int64_t column = 0; column < 5; ++column)
      for (int64_t k = 0; k < 7; ++k) expected[size_t(row * 5 + column)] += double(a[row * 7 + k]) * double(b[k * 5 + column]);
  expect_close(data_of(output), expected, "matmul after the failed library call");
}

TEST_F(ContractionTest, OnednnConvolutionForwardMatchesLoop) {
  use_onednn();
  NodePtr input = filled({2, 8, 12, 12}, 13), weight = filled({16, 8, 3, 3}, 14);
  NodePtr output = convolution_2d(input, weight, 1, 1, 1);
  ASSERT_EQ(output->shape, (Shape{2, 16, 12, 12}));
  std::vector<PlannedKernel> kernels = plan_kernels({output});
  ASSERT_EQ(kernels.size(), 1u);
  ASSERT_NE(kernels[0].library, nullptr) << "not lowered to a library call: " << kernels[0].contraction;
  EXPECT_NE(kernels[0].library->describe().find("convolution forward"), std::string::npos)
      << kernels[0].library->describe();

  int64_t calls_before = stats().library_calls.load();
  sync({output});
  EXPECT_EQ(stats().library_calls.load() - calls_before, 1);

  std::vector<double> expected = reference_convolution(
      input, weight, 1, 1, 1, [](int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) { return false; });
  expect_close(data_of(output), expected, "convolution");
}

}  // namespace
}  // namespace metajit
