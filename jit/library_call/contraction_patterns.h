// Reads a matched contraction (jit/library_call/contraction.h) as a matrix product or a convolution, purely from its
// affine indices: which loop variables index which tensor, with what coefficients and offsets. Library-independent, so
// the classification is tested without oneDNN and a second backend (cuBLAS/cuDNN) can reuse it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jit/library_call/contraction.h"

namespace metajit {

// One tensor as a library sees it: dims in the library's canonical order, element strides into the buffer
// and a constant element offset.
struct TensorLayout {
  int buffer = -1;
  int64_t offset = 0;
  std::vector<int64_t> dims, strides;
  std::string describe() const;
};

// A post-op as the library applies it, with its tensor operand (Add, Subtract, Multiply) laid out along the
// library's destination dims: extent 1 where it broadcasts.
struct LibraryPostOp {
  PostOp op;
  std::optional<TensorLayout> operand;
};

// " + bias + relu" for a library call's name.
std::string post_ops_text(bool bias, const std::vector<LibraryPostOp>& post_ops);

// out[b..., m, n] = sum_k left[b..., m, k] * right[b..., k, n]; a batch extent of 1 in an operand broadcasts it.
struct MatmulProblem {
  TensorLayout left, right,
      output;  // dims [batch..., rows, inner], [batch..., inner, columns], [batch..., rows, columns]
  std::optional<TensorLayout> bias;     // dims [1..., 1, columns]: added to every row
  std::vector<LibraryPostOp> post_ops;  // then these, in order
  std::string key() const;
};

enum class ConvolutionPass { Forward, BackwardData, BackwardWeights };
const char* convolution_pass_name(ConvolutionPass pass);

// A convolution in NC* terms (cross-correlation, as in PyTorch): destination [N, O, out...] from source
// [N, C, in...] and weights [O, C, kernel...], or [G, O/G, C/G, kernel...] with groups G > 1 (each group of
// C/G source channels makes O/G destination channels). `pass` says which of the three tensors the kernel writes.
struct ConvolutionProblem {
  ConvolutionPass pass = ConvolutionPass::Forward;
  int64_t groups = 1;
  TensorLayout source, weights, destination;
  std::vector<int64_t> stride, dilation, padding_before, padding_after;  // per spatial dim; dilation 1 = dense
  bool zero_output_first = false;       // the written tensor is only partly covered (backward data, a cropped window)
  std::optional<TensorLayout> bias;     // forward only: one value per output channel, dims [O]
  std::vector<LibraryPostOp> post_ops;  // forward only: applied after the bias, in order
  std::string key() const;
};

std::optional<MatmulProblem> as_matmul(const Contraction& contraction);
std::optional<ConvolutionProblem> as_convolution(const Contraction& contraction);
// A 1x1, stride-1 convolution's weight gradient, dW[o, c] = sum over n and the pixels of dy[n, o, p] * x[n, c, p]:
// no tensor has a window index to mark it as the image, and the inner dims (n, p) do not merge into one matrix
// dimension, so neither of the above takes it.
std::optional<ConvolutionProblem> as_pointwise_weight_gradient(const Contraction& contraction);

}  // namespace metajit
