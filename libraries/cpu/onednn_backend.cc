// Each call owns its primitive and the memory descriptors of the user's tensors; running it wraps the kernel's
// buffers (no copy), reorders into oneDNN's chosen formats where they differ (reusing a copy an earlier call of
// the same plan run made: libraries/cpu/onednn_layout_cache.h), executes and reorders back.
// Scratchpads are per call (user mode) so two threads may run the same primitive at once.
#include "libraries/cpu/onednn_backend.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/log.h"
#include "core/stats.h"
#include "jit/library_call/canonical_contraction.h"
#include "jit/library_call/contraction_patterns.h"
#include "libraries/cpu/onednn_layout_cache.h"
#include "libraries/cpu/winograd_call.h"

namespace metajit {
namespace {

using dnnl::memory;

// Below this many multiply-adds a generated loop is as fast as a library call.
constexpr int64_t kMinimumMultiplyAdds = 4096;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

memory::desc user_desc(const TensorLayout& layout) {
  return memory::desc(memory::dims(layout.dims.begin(), layout.dims.end()), memory::data_type::f32,
                      memory::dims(layout.strides.begin(), layout.strides.end()));
}

memory::desc any_desc(const TensorLayout& layout) {
  return memory::desc(memory::dims(layout.dims.begin(), layout.dims.end()), memory::data_type::f32,
                      memory::format_tag::any);
}

float* address(void* const* buffers, const TensorLayout& layout) {
  return static_cast<float*>(buffers[layout.buffer]) + layout.offset;
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attributes;
  attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attributes;
}

bool is_reference(const std::string& implementation) { return implementation.find("ref") != std::string::npos; }

// Scratchpad in user mode plus the problem's post-ops (ReLU; x * scale + shift; adding, subtracting or
// multiplying by a tensor, which oneDNN reads in the user's layout at execution).
dnnl::primitive_attr call_attributes(const std::vector<LibraryPostOp>& library_post_ops) {
  dnnl::primitive_attr attributes = user_scratchpad();
  if (library_post_ops.empty()) return attributes;
  dnnl::post_ops post_ops;
  for (const LibraryPostOp& library : library_post_ops) {
    const PostOp& op = library.op;
    switch (op.kind) {
      case PostOp::Kind::Relu: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f); break;
      case PostOp::Kind::Linear:
        post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, float(op.scale), float(op.shift));
        break;
      case PostOp::Kind::Add: post_ops.append_binary(dnnl::algorithm::binary_add, user_desc(*library.operand)); break;
      case PostOp::Kind::Subtract:
        post_ops.append_binary(dnnl::algorithm::binary_sub, user_desc(*library.operand));
        break;
      case PostOp::Kind::Multiply:
        post_ops.append_binary(dnnl::algorithm::binary_mul, user_desc(*library.operand));
        break;
    }
  }
  attributes.set_post_ops(post_ops);
  return attributes;
}

// The tensors of a call's binary post-ops, as execution arguments over the kernel's buffers.
void add_post_op_operands(const std::vector<LibraryPostOp>& post_ops, void* const* buffers,
                          std::unordered_map<int, memory>* arguments) {
  for (size_t position = 0; position < post_ops.size(); ++position) {
    const std::optional<TensorLayout>& operand = post_ops[position].operand;
    if (!operand) continue;
    (*arguments)[DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(position)) | DNNL_ARG_SRC_1] =
        memory(user_desc(*operand), cpu_engine(), address(buffers, *operand));
  }
}

// A single (unbatched) product whose operands each have a unit stride goes to oneDNN's sgemm, which measured
// about 5% faster than the matmul primitive on plain memory here (1024^3 float32, 2 threads: 6.35 vs 6.7 ms).
struct GemmShape {
  char transpose_left = 'N', transpose_right = 'N';
  int64_t rows = 0, columns = 0, inner = 0, left_lead = 0, right_lead = 0, output_lead = 0;
};

// The BLAS view of a row-major [first, second] operand: 'N' with its row stride, or 'T' when it is stored
// transposed; false when neither stride is 1.
bool blas_operand(const TensorLayout& layout, size_t rank, char* transpose, int64_t* lead) {
  int64_t first = layout.strides[rank - 2], second = layout.strides[rank - 1];
  int64_t rows = layout.dims[rank - 2], columns = layout.dims[rank - 1];
  if (second == 1 && first >= std::max<int64_t>(columns, 1)) {
    *transpose = 'N';
    *lead = first;
    return true;
  }
  if (first == 1 && second >= std::max<int64_t>(rows, 1)) {
    *transpose = 'T';
    *lead = second;
    return true;
  }
  return false;
}

std::optional<GemmShape> as_gemm(const MatmulProblem& problem) {
  if (problem.bias || !problem.post_ops.empty()) return std::nullopt;  // sgemm has no post-ops
  size_t rank = problem.output.dims.size();
  for (size_t dim = 0; dim + 2 < rank; ++dim)
    if (problem.output.dims[dim] != 1) return std::nullopt;
  GemmShape shape;
  shape.rows = problem.output.dims[rank - 2];
  shape.columns = problem.output.dims[rank - 1];
  shape.inner = problem.left.dims[rank - 1];
  char output_transpose = 'N';
  if (!blas_operand(problem.left, rank, &shape.transpose_left, &shape.left_lead) ||
      !blas_operand(problem.right, rank, &shape.transpose_right, &shape.right_lead) ||
      !blas_operand(problem.output, rank, &output_transpose, &shape.output_lead) || output_transpose != 'N')
    return std::nullopt;
  return shape;
}

// sgemm reads a right operand stored transposed (x @ W^T, every Linear layer's forward) far slower than the matmul
// primitive does, worst with few rows: [32, 256] x [256, 1024] took 192 us against 95 (an LSTM step's recurrent
// product), [32, 1024] x [1024, 1024] 1773 us against 389, [2048, 1024] x [1024, 256] 7.5 ms against 5.5 (2 AMD
// EPYC threads; the primitive ran either layout alike). Such products go to the primitive.
std::optional<GemmShape> as_fast_gemm(const MatmulProblem& problem) {
  std::optional<GemmShape> shape = as_gemm(problem);
  if (shape && shape->transpose_right == 'T') return std::nullopt;
  return shape;
}

class MatmulCall : public LibraryCall {
 public:
  explicit MatmulCall(const MatmulProblem& problem) : problem_(problem), gemm_(as_fast_gemm(problem)) {
    if (gemm_) {
      implementation_ = "sgemm";
      // oneDNN's sgemm (and its matmul primitive) run a left operand stored transposed at about half speed on
      // AVX2 (a weight gradient x^T dy, [1024, 2048] x [2048, 256]: 15.8 ms against 8.7 for the same product
      // from a row-major copy). The left operand is copied row-major first (a reorder, kept for other calls of
      // the run that read it the same way) and the product runs untransposed.
      if (gemm_->transpose_left == 'T') {
        size_t rank = problem.left.dims.size();
        memory::dims dims{problem.left.dims[rank - 2], problem.left.dims[rank - 1]};
        left_ =
            memory::desc(dims, memory::data_type::f32, memory::dims{problem.left.strides[rank - 2], gemm_->left_lead});
        left_row_major_ = memory::desc(dims, memory::data_type::f32, memory::format_tag::ab);
        gemm_->transpose_left = 'N';
        gemm_->left_lead = dims[1];
        implementation_ = "reorder + sgemm";
      }
      // With 128 to 511 rows, sgemm reads a row-major right operand in place, and rows a multiple of 1 KiB apart
      // fall on the same cache sets: [256, 2048] x [2048, 1024] took 13-18 ms on AVX2, 7.4 with the rows 64
      // bytes further apart (a transformer's weight gradients have this shape; 128 rows: 16 -> 7.3 ms). Such an
      // operand is copied with its rows padded (kept like the left copy); with fewer rows the copy would cost
      // about what it saves (64 rows ran alike either way), and from 512 on sgemm packs the operand itself.
      int64_t rows = gemm_->rows, columns = gemm_->columns, right_lead = gemm_->right_lead;
      if (gemm_->transpose_right == 'N' && rows >= 128 && rows < 512 && right_lead % 256 == 0 && gemm_->inner >= 256) {
        size_t rank = problem.right.dims.size();
        memory::dims dims{problem.right.dims[rank - 2], columns};
        right_ = memory::desc(dims, memory::data_type::f32, memory::dims{right_lead, 1});
        gemm_->right_lead = columns + 16;
        right_padded_ = memory::desc(dims, memory::data_type::f32, memory::dims{gemm_->right_lead, 1});
        implementation_ = (left_row_major_ ? "reorder + pad + sgemm" : "pad + sgemm");
      }
      return;
    }
    plan_sgemm_on_a_copy_of_right(problem);
    left_ = user_desc(problem.left);
    right_ = user_desc(problem.right);
    output_ = user_desc(problem.output);
    if (problem.bias) bias_ = user_desc(*problem.bias);
    dnnl::matmul::desc description =
        problem.bias ? dnnl::matmul::desc(left_, right_, bias_, output_) : dnnl::matmul::desc(left_, right_, output_);
    descriptor_ = dnnl::matmul::primitive_desc(description, call_attributes(problem.post_ops), cpu_engine());
    primitive_ = dnnl::matmul(descriptor_);
    implementation_ = descriptor_.impl_info_str();
  }

  const std::string& implementation() const { return implementation_; }

  void run(void* const* buffers) const override {
    if (gemm_on_copy_ && reads_in_run(address(buffers, problem_.right)) > 1) {
      const GemmShape& shape = *gemm_on_copy_;
      std::vector<StoragePtr> owners;
      const float* right = gemm_operand(buffers, problem_.right, *right_stored_, right_row_major_, owners);
      return sgemm(shape, address(buffers, problem_.left), right, address(buffers, problem_.output));
    }
    if (gemm_) {
      const GemmShape& shape = *gemm_;
      std::vector<StoragePtr> owners;
      const float* left = gemm_operand(buffers, problem_.left, left_, left_row_major_, owners);
      const float* right = gemm_operand(buffers, problem_.right, right_, right_padded_, owners);
      return sgemm(shape, left, right, address(buffers, problem_.output));
    }
    dnnl::stream stream(cpu_engine());
    memory scratchpad = scratchpad_memory(descriptor_.scratchpad_desc(), cpu_engine());
    std::unordered_map<int, memory> arguments{
        {DNNL_ARG_SRC, memory(left_, cpu_engine(), address(buffers, problem_.left))},
        {DNNL_ARG_WEIGHTS, memory(right_, cpu_engine(), address(buffers, problem_.right))},
        {DNNL_ARG_DST, memory(output_, cpu_engine(), address(buffers, problem_.output))},
        {DNNL_ARG_SCRATCHPAD, scratchpad}};
    if (problem_.bias) arguments[DNNL_ARG_BIAS] = memory(bias_, cpu_engine(), address(buffers, *problem_.bias));
    add_post_op_operands(problem_.post_ops, buffers, &arguments);
    primitive_.execute(stream, arguments);
    stream.wait();
  }

  static void sgemm(const GemmShape& shape, const float* left, const float* right, float* output) {
    dnnl_status_t status =
        dnnl_sgemm(shape.transpose_left, shape.transpose_right, shape.rows, shape.columns, shape.inner, 1.0f, left,
                   shape.left_lead, right, shape.right_lead, 0.0f, output, shape.output_lead);
    if (status != dnnl_success) throw std::runtime_error("oneDNN sgemm failed (status " + std::to_string(status) + ")");
  }

  // An sgemm operand: the tensor itself, or its copy in `copy_layout` (made once per sync, see reordered_input).
  static const float* gemm_operand(void* const* buffers, const TensorLayout& layout, const memory::desc& user_layout,
                                   const std::optional<memory::desc>& copy_layout, std::vector<StoragePtr>& owners) {
    float* data = address(buffers, layout);
    if (!copy_layout) return data;
    dnnl::stream stream(cpu_engine());
    memory copy = reordered_input(memory(user_layout, cpu_engine(), data), *copy_layout, stream, owners);
    stream.wait();
    return static_cast<const float*>(copy.get_data_handle());
  }

  // x @ W^T (a Linear layer, an RNN step) runs in the primitive, which reads W^T in place; sgemm on a row-major
  // copy of W^T is faster still, most with few rows: [32, 256] x [256, 1024] (an LSTM step) took 86 us against
  // the primitive's 139 (and sgemm reading W^T in place 168), [1, 1024] x [1024, 1024] 46 against 100, while the
  // copy costs 34 us. An RNN reads its recurrent weight at every step, so from the second read in a run on the
  // product runs that way, on a copy made once for the run (reordered_input); a weight read once keeps the
  // primitive.
  void plan_sgemm_on_a_copy_of_right(const MatmulProblem& problem) {
    std::optional<GemmShape> shape = as_gemm(problem);
    if (!shape || shape->transpose_right != 'T' || shape->transpose_left != 'N') return;
    size_t rank = problem.right.dims.size();
    memory::dims dims{problem.right.dims[rank - 2], problem.right.dims[rank - 1]};
    right_stored_ = memory::desc(dims, memory::data_type::f32,
                                 memory::dims{problem.right.strides[rank - 2], problem.right.strides[rank - 1]});
    right_row_major_ = memory::desc(dims, memory::data_type::f32, memory::format_tag::ab);
    shape->transpose_right = 'N';
    shape->right_lead = dims[1];
    gemm_on_copy_ = shape;
  }

  std::string describe() const override {
    const auto& dims = problem_.output.dims;
    size_t rank = dims.size();
    std::string batch;
    for (size_t dim = 0; dim + 2 < rank; ++dim) batch += std::to_string(dims[dim]) + "x";
    return "onednn matmul " + batch + std::to_string(dims[rank - 2]) + "x" +
           std::to_string(problem_.left.dims[rank - 1]) + "x" + std::to_string(dims[rank - 1]) +
           post_ops_text(problem_.bias.has_value(), problem_.post_ops) + " (" + implementation_ +
           (gemm_on_copy_ ? "; read again: reorder + sgemm" : "") + ")";
  }

 private:
  MatmulProblem problem_;
  std::optional<GemmShape> gemm_;
  std::optional<GemmShape> gemm_on_copy_;        // after a first read of right: sgemm on right_row_major_
  std::optional<memory::desc> right_stored_;     // right as stored (transposed), the copy's source
  std::optional<memory::desc> left_row_major_;   // the sgemm's left operand is a row-major copy of left_
  std::optional<memory::desc> right_padded_;     // the sgemm's right operand is a row-padded copy of right_
  std::optional<memory::desc> right_row_major_;  // gemm_on_copy_'s right operand
  memory::desc left_, right_, output_, bias_;
  dnnl::matmul::primitive_desc descriptor_;
  dnnl::matmul primitive_;
  std::string implementation_;
};

// Winograd F(4x4, 3x3) (oneDNN's jit_wino_4x3) against the direct kernels, each pass timed on this machine
// (2 AVX-512 cores, float32, docs/lowering.md): about 2x faster for 3x3 stride-1 convolutions with 64 to 512
// channels once there are 128 or more 4x4 output tiles (ResNet's 32x32 to 8x8 stages at batch 32); slower with
// 16 channels or a few tiles (batch 8 at 8x8, every 4x4 map at batch 32), where its transforms dominate.
// Backward weights gains from fewer tiles: 32 are enough on maps of 4x4 or more (512 channels, 4x4 maps, batch
// 32: 9.2 -> 4.8 ms; 64 channels: 0.18 -> 0.13 ms), while 2x2 maps and 16 or fewer tiles were mixed or slower
// (512 channels at batch 4: 1.2 -> 3.5 ms). It reads the same layouts as the direct forward pass, so mixing costs
// no extra copies.
bool onednn_winograd_pays(const ConvolutionProblem& problem) {
  if (problem.groups != 1 || problem.weights.dims.size() != 4) return false;  // oneDNN's Winograd: 2-D, ungrouped
  for (size_t dim = 0; dim < 2; ++dim)
    if (problem.weights.dims[2 + dim] != 3 || problem.stride[dim] != 1 || problem.dilation[dim] != 1) return false;
  int64_t out_channels = problem.weights.dims[0], channels = problem.weights.dims[1];
  if (std::min(out_channels, channels) < 32) return false;
  int64_t tiles = problem.destination.dims[0];
  for (size_t dim = 2; dim < 4; ++dim) tiles *= (problem.destination.dims[dim] + 3) / 4;
  if (problem.pass == ConvolutionPass::BackwardWeights)
    return tiles >= 32 && problem.destination.dims[2] >= 4 && problem.destination.dims[3] >= 4;
  return tiles >= 128;
}

// The most scratchpad `auto` lets a Winograd call take: 8x its three tensors' bytes, or 16 MiB (which no training
// step notices). oneDNN's Winograd weight gradient sums a transformed copy of the weights (36 values per 3x3 filter)
// per thread, so its scratchpad grows with the channels squared and the thread count, not with the data:
// ResNet-18's 512-channel layers at batch 32 asked for 120 MiB on 2 threads, 11x their tensors, while every
// activation was still held, which made it the training step's peak (448 MiB; 351 with those calls direct, each
// about 3 ms slower). The next largest in that step, 256 channels' weight gradient, is 7x (44 MiB); forward and
// backward data are about 3x.
constexpr size_t kWinogradScratchpadFactor = 8;
constexpr size_t kWinogradScratchpadAlways = size_t(16) << 20;

size_t winograd_scratchpad_limit(const ConvolutionProblem& problem) {
  size_t elements = 0;
  for (const TensorLayout* layout : {&problem.source, &problem.weights, &problem.destination})
    elements += size_t(std::accumulate(layout->dims.begin(), layout->dims.end(), int64_t(1), std::multiplies<>()));
  return std::max(elements * sizeof(float) * kWinogradScratchpadFactor, kWinogradScratchpadAlways);
}

// Channels-last activations for a convolution with fewer output channels than a vector (an image network's last
// layer, 16 -> 3 channels; a segmentation head). oneDNN's blocked layouts pad those channels to 16, and the
// backward-data pass sums over them. Timed on this machine (C++ against oneDNN 2.6, 2 AVX-512 cores, the call's
// reorders from and to NCHW included, least of 30 runs, two rounds), blocked -> channels last in ms:
//   [4, 16, 72, 72] -> 3, 9x9:   forward 3.2-3.3 -> 3.2,    backward data 3.3-3.5 -> 0.63-0.65, weights 3.9 -> 3.2-3.3
//   [4, 16, 66, 66] -> 3, 3x3:   forward 0.53 -> 0.44-0.46, backward data 0.64-0.69 -> 0.14,    weights 0.56 ->
//   0.42-0.43 [4, 32, 66, 66] -> 8, 3x3:   forward 1.0-1.1 -> 0.88-0.90, backward data 0.80-0.94 -> 0.57-0.63,
//   weights 1.0 -> 0.88-0.91 [4, 16, 64, 64] -> 4, 1x1:   forward 0.10-0.12 -> 0.10-0.11, backward data 0.19-0.20 ->
//   0.11-0.12, weights 0.32-0.40 -> 0.09-0.10
// The first layer (3 -> 16 channels) and 3x3 layers of 16 and 64 channels were within 10% either way, so they keep
// oneDNN's choice.
bool channels_last_pays(const ConvolutionProblem& problem) {
  if (problem.groups != 1 || problem.weights.dims.size() < 3 || problem.weights.dims.size() > 5) return false;
  int64_t out_channels = problem.weights.dims[0], channels = problem.weights.dims[1];
  return out_channels < 16 && channels >= 16;
}

// Whether this thread's plan run keeps its convolutions' weight copies for later runs: when it computes no
// weight gradient (inference). A training run replaces its weights after it, so their copies go at its end, and
// kept longer they had raised ResNet-18's training peak by 50 MiB for nothing.
thread_local bool weight_copies_outlive_run = false;

void begin_library_run(const std::vector<const LibraryCall*>& calls) {
  weight_copies_outlive_run = true;
  for (const LibraryCall* call : calls)
    if (call->computes_weight_gradient()) weight_copies_outlive_run = false;
}

class ConvolutionCall : public LibraryCall {
 public:
  ConvolutionCall(const ConvolutionProblem& problem, ConvolutionAlgorithm preference)
      : problem_(problem), channels_last_(channels_last_pays(problem)) {
    user_[0] = user_desc(problem.source);
    user_[1] = user_desc(problem.weights);
    user_[2] = user_desc(problem.destination);
    bool winograd = preference == ConvolutionAlgorithm::Winograd ||
                    (preference == ConvolutionAlgorithm::Auto && onednn_winograd_pays(problem));
    if (winograd) {
      try {
        build(dnnl::algorithm::convolution_winograd);
        if (preference == ConvolutionAlgorithm::Winograd ||
            scratchpad_.get_size() <= winograd_scratchpad_limit(problem))
          return;                     // else `auto` finds its scratchpad too large: direct
      } catch (const dnnl::error&) {  // not for this shape or this CPU: the direct kernels take it
      }
    }
    if (channels_last_) {
      try {
        build(dnnl::algorithm::convolution_direct);
        if (!is_reference(implementation_)) return;
      } catch (const dnnl::error&) {
      }
      channels_last_ = false;  // no fast kernel for it: oneDNN's own layouts
    }
    build(dnnl::algorithm::convolution_direct);
  }

  const std::string& implementation() const { return implementation_; }

  void run(void* const* buffers) const override {
    dnnl::engine& engine = cpu_engine();
    dnnl::stream stream(engine);
    const TensorLayout* layouts[3] = {&problem_.source, &problem_.weights, &problem_.destination};
    if (problem_.zero_output_first) std::memset(buffers[0], 0, output_bytes_);
    std::vector<StoragePtr> owners;  // converted tensors, alive until the call returns
    std::unordered_map<int, memory> arguments;
    memory library_written;
    for (int tensor = 0; tensor < 3; ++tensor) {
      memory user(user_[tensor], engine, address(buffers, *layouts[tensor]));
      if (tensor == written_) forget_copies_within(user.get_data_handle(), user_[tensor].get_size());
      if (library_[tensor] == user_[tensor]) {
        arguments[argument_[tensor]] = user;
      } else if (tensor == written_) {
        library_written = user;
        arguments[argument_[tensor]] = scratch_memory(library_[tensor], engine, owners);
      } else if (tensor == 1 && weight_copies_outlive_run) {  // the same model's next run reads them again
        arguments[argument_[tensor]] = reordered_weights(user, library_[tensor], stream, owners);
      } else {
        arguments[argument_[tensor]] = reordered_input(user, library_[tensor], stream, owners);
      }
    }
    arguments[DNNL_ARG_SCRATCHPAD] = scratchpad_memory(scratchpad_, engine);
    if (problem_.bias) arguments[DNNL_ARG_BIAS] = memory(bias_, engine, address(buffers, *problem_.bias));
    add_post_op_operands(problem_.post_ops, buffers, &arguments);
    primitive_.execute(stream, arguments);
    if (library_written) {
      memory& converted = arguments[argument_[written_]];
      dnnl::reorder(converted, library_written).execute(stream, converted, library_written);
      stats().library_reorders++;
    }
    stream.wait();
  }

  bool computes_weight_gradient() const override { return problem_.pass == ConvolutionPass::BackwardWeights; }

  std::string describe() const override {
    return std::string("onednn convolution ") + convolution_pass_name(problem_.pass) +
           post_ops_text(problem_.bias.has_value(), problem_.post_ops) + " (" + implementation_ +
           (channels_last_ ? ", channels last" : "") + ")";
  }

  void set_output_bytes(size_t bytes) { output_bytes_ = bytes; }

 private:
  // The backward passes are built against the forward's descriptor, so all three agree on the layouts (and the
  // layout copies one call makes serve the others).
  void build(dnnl::algorithm algorithm) {
    const ConvolutionProblem& problem = problem_;
    memory::dims strides(problem.stride.begin(), problem.stride.end());
    memory::dims dilation, before(problem.padding_before.begin(), problem.padding_before.end()),
        after(problem.padding_after.begin(), problem.padding_after.end());
    for (int64_t step : problem.dilation) dilation.push_back(step - 1);  // oneDNN counts the gaps
    memory::desc source = activation_desc(problem.source), weights = any_desc(problem.weights),
                 destination = activation_desc(problem.destination);
    dnnl::primitive_attr attributes = user_scratchpad();
    if (problem.bias) bias_ = user_desc(*problem.bias);
    dnnl::convolution_forward::desc forward =
        problem.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, source, weights,
                                                       bias_, destination, strides, dilation, before, after)
                     : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, source, weights,
                                                       destination, strides, dilation, before, after);
    dnnl::convolution_forward::primitive_desc forward_descriptor(forward, call_attributes(problem.post_ops),
                                                                 cpu_engine());
    switch (problem.pass) {
      case ConvolutionPass::Forward:
        set(forward_descriptor, DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST);
        primitive_ = dnnl::convolution_forward(forward_descriptor);
        written_ = 2;
        break;
      case ConvolutionPass::BackwardData: {
        dnnl::convolution_backward_data::desc backward(algorithm, source, weights, destination, strides, dilation,
                                                       before, after);
        dnnl::convolution_backward_data::primitive_desc descriptor(backward, attributes, cpu_engine(),
                                                                   forward_descriptor);
        set(descriptor, DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST);
        primitive_ = dnnl::convolution_backward_data(descriptor);
        written_ = 0;
        break;
      }
      case ConvolutionPass::BackwardWeights: {
        dnnl::convolution_backward_weights::desc backward(algorithm, source, weights, destination, strides, dilation,
                                                          before, after);
        dnnl::convolution_backward_weights::primitive_desc descriptor(backward, attributes, cpu_engine(),
                                                                      forward_descriptor);
        set(descriptor, DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST);
        primitive_ = dnnl::convolution_backward_weights(descriptor);
        written_ = 1;
        break;
      }
    }
  }

  // The image or its output side: oneDNN's choice, or channels last (see channels_last_pays).
  memory::desc activation_desc(const TensorLayout& layout) const {
    if (!channels_last_) return any_desc(layout);
    static const memory::format_tag tags[] = {memory::format_tag::nwc, memory::format_tag::nhwc,
                                              memory::format_tag::ndhwc};
    return memory::desc(memory::dims(layout.dims.begin(), layout.dims.end()), memory::data_type::f32,
                        tags[layout.dims.size() - 3]);
  }

  template <typename Descriptor>
  void set(const Descriptor& descriptor, int source, int weights, int destination) {
    argument_[0] = source;
    argument_[1] = weights;
    argument_[2] = destination;
    for (int tensor = 0; tensor < 3; ++tensor)
      library_[tensor] = descriptor.query_md(dnnl::query::exec_arg_md, argument_[tensor]);
    scratchpad_ = descriptor.scratchpad_desc();
    implementation_ = descriptor.impl_info_str();
  }

  ConvolutionProblem problem_;
  bool channels_last_ = false;
  memory::desc user_[3], library_[3], scratchpad_;  // source, weights, destination
  memory::desc bias_;                               // forward with a bias: plain [O]
  int argument_[3] = {0, 0, 0};
  int written_ = 2;
  size_t output_bytes_ = 0;
  dnnl::primitive primitive_;
  std::string implementation_;
};

int64_t multiply_adds(const Contraction& contraction) {
  int64_t total = 1;
  for (const auto& [name, extent] : contraction.extents) total *= extent;
  return total;
}

// Whether oneDNN has Winograd kernels on this CPU (jit_wino_4x3 needs AVX-512): asked once, with a shape they take.
bool onednn_has_winograd() {
  static const bool has = [] {
    memory::desc source({1, 64, 8, 8}, memory::data_type::f32, memory::format_tag::any);
    memory::desc weights({64, 64, 3, 3}, memory::data_type::f32, memory::format_tag::any);
    try {
      dnnl::convolution_forward::desc forward(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_winograd,
                                              source, weights, source, {1, 1}, {0, 0}, {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc descriptor(forward, cpu_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

std::shared_ptr<const LibraryCall> convolution_call(const ConvolutionProblem& problem, const Contraction& contraction,
                                                    ConvolutionAlgorithm algorithm) {
  size_t output_bytes = size_t(shape_numel(contraction.output.shape)) * sizeof(float);
  // Without oneDNN's Winograd, ours (libraries/cpu/winograd_call.h) takes the 3x3 convolutions where it pays, or all it
  // applies to under `winograd`, with their bias and post-ops.
  if (algorithm != ConvolutionAlgorithm::Direct && !onednn_has_winograd() && winograd_applies(problem) &&
      (algorithm == ConvolutionAlgorithm::Winograd || winograd_beats_direct(problem)))
    return winograd_call(problem, output_bytes);
  auto call = std::make_shared<ConvolutionCall>(problem, algorithm);
  call->set_output_bytes(output_bytes);
  if (is_reference(call->implementation())) return nullptr;
  // A depthwise convolution (one image channel per group) through im2col + gemm multiplies a window's few taps per
  // group as a matrix product of its own: oneDNN has no direct depthwise kernel for some passes (1-D backward data)
  // and falls back to it, 10x the time of the generated stencil ([32, 64, 1024], 3 taps: 5.7 against 0.6 ms).
  bool depthwise = problem.groups > 1 && problem.weights.dims.size() > 2 && problem.weights.dims[1] == 1 &&
                   problem.weights.dims[2] == 1;
  if (depthwise && call->implementation().find("gemm") != std::string::npos) return nullptr;
  if (!contraction.post_ops.empty()) {
    // Post-ops must not cost the convolution its fast kernels. A tensor post-op (a residual) in the user's plain
    // layout next to the blocked destination oneDNN prefers sends it to the im2col + gemm implementation, 16x
    // slower at [32, 64, 56, 56] than Winograd plus a separate add; then the plain call and the epilogue run.
    Contraction plain = contraction;
    plain.post_ops.clear();
    auto plain_call = std::dynamic_pointer_cast<const ConvolutionCall>(onednn_library_call(plain));
    if (plain_call && plain_call->implementation() != call->implementation()) {
      log_message(LogLevel::Info, "not folding post-ops into " + call->describe() + ": without them oneDNN runs " +
                                      plain_call->implementation());
      return nullptr;
    }
  }
  return call;
}

std::shared_ptr<const LibraryCall> create_call(const Contraction& contraction, ConvolutionAlgorithm algorithm) {
  if (auto problem = as_convolution(contraction)) return convolution_call(*problem, contraction, algorithm);
  if (auto problem = as_matmul(contraction)) {
    auto call = std::make_shared<MatmulCall>(*problem);
    if (is_reference(call->implementation())) return nullptr;
    return call;
  }
  if (auto problem = as_pointwise_weight_gradient(contraction))
    return convolution_call(*problem, contraction, algorithm);
  return nullptr;
}

}  // namespace

std::shared_ptr<const LibraryCall> onednn_library_call(const Contraction& contraction) {
  if (contraction.dtype != DType::Float32 || multiply_adds(contraction) < kMinimumMultiplyAdds) return nullptr;
  // Made for the canonical form (tensors numbered in order, slice positions in the addresses): every step of a
  // loop over x[i], and the same product in kernels with other inputs, share one call.
  CanonicalContraction canonical = canonical_contraction(contraction);
  if (!canonical.identity())
    return call_with_slots(onednn_library_call(canonical.contraction), canonical, int(sizeof(float)));
  // Calls are cached by the contraction's own description, which fixes every shape, stride and offset.
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const LibraryCall>> calls;
  ConvolutionAlgorithm algorithm = convolution_algorithm();
  std::string description = contraction.describe(), key = description + " " + convolution_algorithm_name(algorithm);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = calls.find(key);
    if (found != calls.end()) return found->second;
  }
  std::shared_ptr<const LibraryCall> call;
  try {
    call = create_call(contraction, algorithm);
  } catch (const dnnl::error& error) {
    log_message(LogLevel::Info, std::string("oneDNN declined ") + description + ": " + error.what());
    call = nullptr;
  }
  if (call) {
    stats().library_calls_made++;
    log_message(LogLevel::Info, "library call " + call->describe() + " for " + description);
  }
  std::lock_guard<std::mutex> lock(mutex);
  calls[key] = call;
  return call;
}

void install_onednn_backend() {
  set_contraction_backend(&onednn_library_call);
  set_library_run_begin_hook(&begin_library_run);
  set_library_run_end_hook(&drop_layout_copies);
  set_library_buffer_released_hook(&forget_copies_within);
  set_host_buffer_freed_hook(&forget_weight_copies_within);
}

}  // namespace metajit
