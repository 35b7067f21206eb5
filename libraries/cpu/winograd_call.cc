#include "libraries/cpu/winograd_call.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "libraries/cpu/onednn_layout_cache.h"
#include "libraries/cpu/winograd_convolution.h"

namespace metajit {
namespace {

WinogradTensor tensor(void* const* buffers, const TensorLayout& layout) {
  WinogradTensor result;
  result.data = static_cast<float*>(buffers[layout.buffer]) + layout.offset;
  for (int dim = 0; dim < 4; ++dim) {
    result.dims[dim] = layout.dims[dim];
    result.strides[dim] = layout.strides[dim];
  }
  return result;
}

// The bytes from a tensor's first element to its last, whatever its strides (a channels-last view's too).
size_t span_bytes(const TensorLayout& layout) {
  int64_t last = 0;
  for (size_t dim = 0; dim < layout.dims.size(); ++dim) last += (layout.dims[dim] - 1) * layout.strides[dim];
  return size_t(last + 1) * sizeof(float);
}

// 4x4 output tiles on maps of 12x12 or more, 2x2 tiles on smaller ones (C++, 2 AVX2 cores, batch 32, each pass,
// F(2x2) -> F(4x4) ms: 64 channels at 32x32 9.5-10.5 -> 7.3-9.2; 128 at 16x16 9.0-10.0 -> 6.8-7.6; 128 at 14x14,
// batch 16, 3.8 -> 3.5; 256 at 8x8 9.4-10.3 -> 8.3-10.5; 64 at 8x8, batch 8, 0.24 -> 0.39). A 4x4 tile of a small
// map is mostly padding, and its 36 products have few tiles each.
// With dilation d the maps are d x d interleaved ones, each 1/d the size.
WinogradTiling tiling_for(const ConvolutionProblem& problem) {
  const auto& output = problem.destination.dims;
  int64_t map = std::min(output[2], output[3]) / problem.dilation[0];
  return map >= 12 ? WinogradTiling::FourByFour : WinogradTiling::TwoByTwo;
}

class WinogradCall : public LibraryCall {
 public:
  WinogradCall(const ConvolutionProblem& problem, size_t output_bytes)
      : problem_(problem), output_bytes_(output_bytes), tiling_(tiling_for(problem)) {}

  void run(void* const* buffers) const override {
    if (problem_.zero_output_first) std::memset(buffers[0], 0, output_bytes_);
    WinogradTensor source = tensor(buffers, problem_.source), weights = tensor(buffers, problem_.weights),
                   destination = tensor(buffers, problem_.destination);
    int64_t top = problem_.padding_before[0], left = problem_.padding_before[1], dilation = problem_.dilation[0];
    switch (problem_.pass) {
      case ConvolutionPass::Forward: {
        const float* bias =
            problem_.bias ? static_cast<const float*>(buffers[problem_.bias->buffer]) + problem_.bias->offset : nullptr;
        forget_copies_within(destination.data, span_bytes(problem_.destination));
        winograd_forward(tiling_, source, weights, destination, top, left, dilation, bias, post_ops(buffers));
        break;
      }
      case ConvolutionPass::BackwardData:
        forget_copies_within(source.data, span_bytes(problem_.source));
        winograd_backward_data(tiling_, destination, weights, source, top, left, dilation);
        break;
      case ConvolutionPass::BackwardWeights:
        forget_copies_within(weights.data, span_bytes(problem_.weights));
        winograd_backward_weights(tiling_, source, destination, weights, top, left, dilation);
        break;
    }
  }

  bool computes_weight_gradient() const override { return problem_.pass == ConvolutionPass::BackwardWeights; }

  std::string describe() const override {
    int points = tiling_ == WinogradTiling::FourByFour ? 36 : 16;
    return std::string("winograd convolution ") + convolution_pass_name(problem_.pass) +
           post_ops_text(problem_.bias.has_value(), problem_.post_ops) + " (" + winograd_tiling_name(tiling_) +
           ": transforms + " + std::to_string(points) + " sgemm)";
  }

 private:
  // The problem's post-ops over this run's buffers; a tensor operand steps 0 along the dims it broadcasts over.
  std::vector<WinogradPostOp> post_ops(void* const* buffers) const {
    std::vector<WinogradPostOp> result;
    for (const LibraryPostOp& library : problem_.post_ops) {
      WinogradPostOp op;
      switch (library.op.kind) {
        case PostOp::Kind::Relu: op.kind = WinogradPostOp::Kind::Relu; break;
        case PostOp::Kind::Linear: op.kind = WinogradPostOp::Kind::Linear; break;
        case PostOp::Kind::Add: op.kind = WinogradPostOp::Kind::Add; break;
        case PostOp::Kind::Subtract: op.kind = WinogradPostOp::Kind::Subtract; break;
        case PostOp::Kind::Multiply: op.kind = WinogradPostOp::Kind::Multiply; break;
      }
      op.scale = float(library.op.scale);
      op.shift = float(library.op.shift);
      if (library.operand) {
        const TensorLayout& operand = *library.operand;
        op.operand = static_cast<const float*>(buffers[operand.buffer]) + operand.offset;
        for (int dim = 0; dim < 4; ++dim) op.strides[dim] = operand.dims[dim] == 1 ? 0 : operand.strides[dim];
      }
      result.push_back(op);
    }
    return result;
  }

  ConvolutionProblem problem_;
  size_t output_bytes_;
  WinogradTiling tiling_;
};

// Work in 2x2 output tiles, whichever tiling runs: the thresholds below were timed with F(2x2, 3x3), and
// F(4x4, 3x3) is only chosen where it is at least as fast.
int64_t tile_count(const ConvolutionProblem& problem) {
  const auto& output = problem.destination.dims;
  return output[0] * ((output[2] + 1) / 2) * ((output[3] + 1) / 2);
}

}  // namespace

bool winograd_applies(const ConvolutionProblem& problem) {
  if (problem.groups != 1 || problem.weights.dims.size() != 4) return false;
  if (problem.dilation[0] != problem.dilation[1]) return false;
  // The transformed filters take 16 or 36 floats per channel pair, in scratch kept per thread: past 2M pairs
  // (288 MB with 4x4 tiles) oneDNN's direct kernels, which need none, take the convolution.
  if (problem.weights.dims[0] * problem.weights.dims[1] > (int64_t(1) << 21)) return false;
  for (size_t dim = 0; dim < 2; ++dim) {
    if (problem.weights.dims[2 + dim] != 3 || problem.stride[dim] != 1) return false;
    if (!winograd_takes(problem.padding_before[dim], problem.dilation[dim])) return false;
  }
  // Strides run forward (a flipped view would put the first element above the others).
  for (const TensorLayout* layout : {&problem.source, &problem.weights, &problem.destination})
    for (int64_t stride : layout->strides)
      if (stride < 0) return false;
  return !problem.bias || problem.bias->strides[0] == 1;
}

// Timed against oneDNN 2.6's jit:avx2 direct kernels on 2 AVX2 cores (docs/lowering.md). F(2x2, 3x3) wins by
// 1.5-3x on ResNet's 3x3 layers at batch 32 (64 channels at 32x32 to 512 at 4x4), and in forward and backward
// weights from 4096 tile-channels (64 channels at batch 8 on 8x8 maps: 0.86x; 512 channels at 2x2, batch 32:
// 0.81x and 0.21x). oneDNN's backward data kernel is faster than its forward one, so there Winograd needs 8x as
// many (64 channels on 8x8 maps at batch 8: 1.31x; 512 channels at 4x4 maps: 0.75x). Under 64 channels the
// products are too thin for sgemm: 16 and 32 channels ran at 0.9-1.3x.
bool winograd_beats_direct(const ConvolutionProblem& problem) {
  int64_t channels = std::min(problem.weights.dims[0], problem.weights.dims[1]);
  if (channels < 64) return false;
  int64_t work = tile_count(problem) * channels;
  return work >= (problem.pass == ConvolutionPass::BackwardData ? 32768 : 4096);
}

std::shared_ptr<const LibraryCall> winograd_call(const ConvolutionProblem& problem, size_t output_bytes) {
  return std::make_shared<WinogradCall>(problem, output_bytes);
}

}  // namespace metajit
