// Tests for the Winograd convolutions, both tilings (libraries/cpu/winograd_convolution.h), against direct loops in
// double: odd and even sizes, single tiles, padding 0 to 2 (different on each side), strided views and a bias, across
// chunk boundaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "libraries/cpu/winograd_convolution.h"

namespace metajit {
namespace {

// A tensor of `dims` whose element strides follow `order` (order[0] the outermost dim), with `gap` unused
// floats after every row, so the views are not contiguous.
struct Strided {
  std::vector<float> storage;
  WinogradTensor view;
  Strided(std::vector<int64_t> dims, std::vector<int> order, int64_t gap, std::mt19937& random) {
    int64_t stride = 1;
    for (int position = 3; position >= 0; --position) {
      int dim = order[position];
      view.dims[dim] = dims[dim];
      view.strides[dim] = stride;
      stride *= dims[dim] + (position == 3 ? gap : 0);
    }
    storage.resize(size_t(stride));
    std::normal_distribution<float> normal;
    for (float& value : storage) value = normal(random);
    view.data = storage.data();
  }
  float at(int64_t a, int64_t b, int64_t c, int64_t d) const {
    return view.data[a * view.strides[0] + b * view.strides[1] + c * view.strides[2] + d * view.strides[3]];
  }
};

struct Case {
  int64_t batch, channels, out_channels, height, width, pad_top, pad_left, pad_bottom, pad_right;
  bool strided;
  int64_t dilation = 1;
};

// F(2x2, 3x3) only adds, subtracts and halves; F(4x4, 3x3) multiplies by up to 8 and divides by 6 and 24, so it
// rounds more (as oneDNN's F(4x4, 3x3) does, about 1e-5 of the scale in a 512-channel layer).
double tolerance(WinogradTiling tiling) { return tiling == WinogradTiling::TwoByTwo ? 1e-6 : 2e-5; }

double scaled_error(const Strided& value, const std::vector<double>& reference, const int64_t* dims) {
  double error = 0, scale = 0;
  size_t index = 0;
  for (int64_t a = 0; a < dims[0]; ++a)
    for (int64_t b = 0; b < dims[1]; ++b)
      for (int64_t c = 0; c < dims[2]; ++c)
        for (int64_t d = 0; d < dims[3]; ++d, ++index) {
          error = std::max(error, std::fabs(value.at(a, b, c, d) - reference[index]));
          scale = std::max(scale, std::fabs(reference[index]));
        }
  return error / scale;
}

class WinogradConvolution : public ::testing::TestWithParam<std::tuple<WinogradTiling, Case>> {};

TEST_P(WinogradConvolution, MatchesDirectLoopsInAllThreePasses) {
  WinogradTiling tiling = std::get<0>(GetParam());
  const Case& shape = std::get<1>(GetParam());
  int64_t dilation = shape.dilation;
  int64_t out_height = shape.height + shape.pad_top + shape.pad_bottom - 2 * dilation;
  int64_t out_width = shape.width + shape.pad_left + shape.pad_right - 2 * dilation;
  std::mt19937 random(int(shape.batch * 131 + shape.channels * 17 + shape.height));
  std::vector<int> order = shape.strided ? std::vector<int>{0, 2, 3, 1} : std::vector<int>{0, 1, 2, 3};
  int64_t gap = shape.strided ? 3 : 0;
  int64_t batch = shape.batch, inputs = shape.channels, outputs = shape.out_channels;
  Strided source({batch, inputs, shape.height, shape.width}, order, gap, random);
  Strided weights({outputs, inputs, 3, 3}, {0, 1, 2, 3}, gap, random);
  Strided upstream({batch, outputs, out_height, out_width}, order, gap, random);
  Strided destination({batch, outputs, out_height, out_width}, order, gap, random);
  Strided diff_source({batch, inputs, shape.height, shape.width}, order, gap, random);
  Strided diff_weights({outputs, inputs, 3, 3}, {0, 1, 2, 3}, gap, random);
  std::vector<float> bias(static_cast<size_t>(outputs));
  for (int64_t o = 0; o < outputs; ++o) bias[size_t(o)] = 0.25f * float(o) - 1.0f;

  winograd_forward(tiling, source.view, weights.view, destination.view, shape.pad_top, shape.pad_left, dilation,
                   bias.data());
  winograd_backward_data(tiling, upstream.view, weights.view, diff_source.view, shape.pad_top, shape.pad_left,
                         dilation);
  winograd_backward_weights(tiling, source.view, upstream.view, diff_weights.view, shape.pad_top, shape.pad_left,
                            dilation);

  std::vector<double> forward(size_t(batch * outputs * out_height * out_width));
  std::vector<double> data_gradient(size_t(batch * inputs * shape.height * shape.width));
  std::vector<double> weight_gradient(size_t(outputs * inputs * 9));
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t o = 0; o < outputs; ++o)
      for (int64_t y = 0; y < out_height; ++y)
        for (int64_t x = 0; x < out_width; ++x) {
          double sum = bias[size_t(o)], gradient = upstream.at(n, o, y, x);
          for (int64_t c = 0; c < inputs; ++c)
            for (int64_t r = 0; r < 3; ++r)
              for (int64_t s = 0; s < 3; ++s) {
                int64_t row = y + dilation * r - shape.pad_top, column = x + dilation * s - shape.pad_left;
                if (row < 0 || row >= shape.height || column < 0 || column >= shape.width) continue;
                double input = source.at(n, c, row, column), weight = weights.at(o, c, r, s);
                sum += input * weight;
                size_t at_source = size_t(((n * inputs + c) * shape.height + row) * shape.width + column);
                data_gradient[at_source] += gradient * weight;
                weight_gradient[size_t(((o * inputs + c) * 3 + r) * 3 + s)] += gradient * input;
              }
          forward[size_t(((n * outputs + o) * out_height + y) * out_width + x)] = sum;
        }
  EXPECT_LT(scaled_error(destination, forward, destination.view.dims), tolerance(tiling));
  EXPECT_LT(scaled_error(diff_source, data_gradient, diff_source.view.dims), tolerance(tiling));
  EXPECT_LT(scaled_error(diff_weights, weight_gradient, diff_weights.view.dims), tolerance(tiling));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, WinogradConvolution,
    ::testing::Combine(
        ::testing::Values(WinogradTiling::TwoByTwo, WinogradTiling::FourByFour),
        ::testing::Values(Case{2, 3, 5, 7, 9, 1, 1, 1, 1, false},  // odd sizes: partial tiles on both edges
                      Case{1, 4, 3, 6, 5, 0, 0, 0, 0, false},   // no padding
                      Case{3, 5, 4, 5, 8, 2, 1, 0, 2, false},   // different padding on every side
                      Case{2, 8, 8, 1, 1, 1, 1, 1, 1, false},   // a 1x1 image: one tile, mostly padding
                      Case{2, 6, 7, 4, 3, 1, 2, 2, 1, true},    // channels-last view with gaps after rows
                      Case{2, 3, 2, 35, 37, 1, 1, 1, 1, true},  // strided, wider than one split row buffer run
                      Case{1, 3, 2, 5, 301, 1, 2, 1, 0, false},  // rows of 151 or 76 tiles: pieces of 64 tiles
                      Case{1, 2, 3, 6, 290, 2, 1, 0, 2, true},
                      // dilation: 4 or 9 interleaved undilated convolutions, each with its own padding
                      Case{2, 3, 4, 17, 19, 2, 2, 2, 2, false, 2},   // "same" padding
                      Case{1, 4, 3, 20, 13, 1, 4, 3, 0, true, 2},    // every padding dilation 2 takes
                      Case{2, 3, 2, 23, 22, 3, 5, 3, 2, false, 3},
                      Case{1, 2, 3, 2, 9, 2, 2, 1, 2, false, 2},     // source row 1 feeds no output: its gradient is 0
                      // 1024 channels: chunks of 112 2x2 tiles or 48 4x4 ones, so several chunks, split inside rows
                      Case{1, 1024, 8, 40, 44, 1, 1, 1, 1, false})));

}  // namespace
}  // namespace metajit
