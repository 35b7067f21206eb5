// Winograd convolutions (Lavin & Gray 2015) for CPUs where oneDNN has no Winograd kernels (its jit_wino_4x3
// needs AVX-512): 3x3, stride 1, dilation 1, ungrouped, float32. F(2x2, 3x3) computes each 2x2 output tile
// with 16 multiplies per channel pair instead of 36, F(4x4, 3x3) each 4x4 tile with 36 instead of 144; the
// multiplies become one matrix product per point of the transformed tile (4x4 or 6x6), run by oneDNN's sgemm,
// and the transforms are sums around them.
// All three passes: forward and backward data are the same algorithm (backward data correlates dy with the
// weights turned 180 degrees and transposed); backward weights is the transposed algorithm F(3x3, 2x2), in
// which the 2x2 dy tiles play the filter.
#pragma once
#include <cstdint>
#include <vector>

namespace metajit {

enum class WinogradTiling { TwoByTwo, FourByFour };
const char* winograd_tiling_name(WinogradTiling tiling);  // "F(2x2,3x3)", "F(4x4,3x3)"

// A 4-D float32 tensor in NCHW (or OIHW) order, with element strides.
struct WinogradTensor {
  float* data = nullptr;
  int64_t dims[4] = {0, 0, 0, 0};
  int64_t strides[4] = {0, 0, 0, 0};
};

// Work applied to each forward output as it is written, in order, after the bias: ReLU; x * scale + shift; or
// x + t, x - t, x * t for a tensor t read at the output's [n, o, y, x] with these strides (0 where it broadcasts).
struct WinogradPostOp {
  enum class Kind { Relu, Linear, Add, Subtract, Multiply };
  Kind kind = Kind::Relu;
  float scale = 1, shift = 0;
  const float* operand = nullptr;
  int64_t strides[4] = {0, 0, 0, 0};
};

// Whether the functions below take this leading padding with this dilation (the same for rows and columns). With
// dilation d the convolution splits into d x d undilated ones, one per residue class of output rows and columns,
// each with a padding of its own; each must be 0 to 2. Without dilation that is the padding itself; with
// dilation 2, padding 1 to 4 (the usual "same" padding is 2).
bool winograd_takes(int64_t padding, int64_t dilation);

// destination[n, o, y, x] = sum over c, r, s of source[n, c, y + d r - pad_top, x + d s - pad_left] *
// weights[o, c, r, s] (+ bias[o] when given, then the post-ops), d the dilation, reading zeros outside the
// source. Overwrites destination.
void winograd_forward(WinogradTiling tiling, const WinogradTensor& source, const WinogradTensor& weights,
                      const WinogradTensor& destination, int64_t pad_top, int64_t pad_left, int64_t dilation,
                      const float* bias, const std::vector<WinogradPostOp>& post_ops = {});

// The gradient of the forward above with respect to its source: diff_source[n, c, y, x] = sum over o, r, s of
// diff_destination[n, o, y - d r + pad_top, x - d s + pad_left] * weights[o, c, r, s]. Overwrites diff_source.
void winograd_backward_data(WinogradTiling tiling, const WinogradTensor& diff_destination,
                            const WinogradTensor& weights, const WinogradTensor& diff_source, int64_t pad_top,
                            int64_t pad_left, int64_t dilation);

// The gradient with respect to the weights: diff_weights[o, c, r, s] = sum over n, y, x of
// diff_destination[n, o, y, x] * source[n, c, y + d r - pad_top, x + d s - pad_left]. Overwrites diff_weights.
void winograd_backward_weights(WinogradTiling tiling, const WinogradTensor& source,
                               const WinogradTensor& diff_destination, const WinogradTensor& diff_weights,
                               int64_t pad_top, int64_t pad_left, int64_t dilation);

}  // namespace metajit
