#include "libraries/cuda_contraction_backend.h"

#include <algorithm>
#include <climits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "core/log.h"
#include "jit/library_call/canonical_contraction.h"
#include "jit/library_call/contraction_patterns.h"
#include "jit/run/cuda_context.h"
#include "libraries/cuda_libraries.h"

namespace metajit {
namespace {

// Smaller products are not worth a library call's fixed cost.
constexpr int64_t kMinimumMultiplyAdds = 1 << 12;
// cuDNN's algorithms may ask for workspace; more than this and the next one is taken.
constexpr size_t kMostWorkspaceBytes = size_t(1) << 30;

constexpr int kOperationNone = 0, kOperationTranspose = 1;  // cublasOperation_t
constexpr int kCudnnFloat = 0;                               // CUDNN_DATA_FLOAT
constexpr int kCudnnPackedFilter = 0;                        // CUDNN_TENSOR_NCHW
constexpr int kCudnnCrossCorrelation = 1;                    // CUDNN_CROSS_CORRELATION
constexpr int kCudnnFmaMath = 3;                             // CUDNN_FMA_MATH: float32 FMA kernels only

float* address(void* const* buffers, const TensorLayout& layout) {
  return static_cast<float*>(buffers[layout.buffer]) + layout.offset;
}

bool fits_int(int64_t value) { return value >= 0 && value <= INT_MAX; }

// ---- matrix products ----

// A p x r matrix whose (row, column) element is at row * row_stride + column * column_stride, as cuBLAS
// (column-major) reads it: directly (leading dimension = the column stride) or transposed.
std::optional<CublasGemmPlan::Operand> column_major(int64_t rows, int64_t columns, int64_t row_stride,
                                                    int64_t column_stride) {
  if ((row_stride == 1 || rows == 1) && (columns == 1 || column_stride >= rows))
    return CublasGemmPlan::Operand{false, columns == 1 ? std::max<int64_t>(rows, 1) : column_stride};
  if ((column_stride == 1 || columns == 1) && (rows == 1 || row_stride >= columns))
    return CublasGemmPlan::Operand{true, rows == 1 ? std::max<int64_t>(columns, 1) : row_stride};
  return std::nullopt;
}

class CublasMatmulCall : public LibraryCall {
 public:
  CublasMatmulCall(const MatmulProblem& problem, const CublasGemmPlan& plan) : problem_(problem), plan_(plan) {}

  void run(void* const* buffers) const override {
    const CublasApi* api = cublas();
    const float one = 1, zero = 0;
    const CublasGemmPlan& g = plan_;
    const float* y = address(buffers, g.y_is_left ? problem_.left : problem_.right);
    const float* z = address(buffers, g.y_is_left ? problem_.right : problem_.left);
    float* x = address(buffers, problem_.output);
    int64_t products = 1;
    for (const CublasGemmPlan::OuterBatch& dim : g.outer) products *= dim.extent;
    for (int64_t product = 0; product < products; ++product) {
      int64_t rest = product, x_offset = 0, y_offset = 0, z_offset = 0;
      for (size_t dim = g.outer.size(); dim-- > 0;) {
        int64_t index = rest % g.outer[dim].extent;
        rest /= g.outer[dim].extent;
        x_offset += index * g.outer[dim].x_stride;
        y_offset += index * g.outer[dim].y_stride;
        z_offset += index * g.outer[dim].z_stride;
      }
      int status = api->sgemm_strided_batched(
          api->handle, g.y.transposed ? kOperationTranspose : kOperationNone,
          g.z.transposed ? kOperationTranspose : kOperationNone, int(g.p), int(g.q), int(g.r), &one, y + y_offset,
          int(g.y.leading), g.y_batch_stride, z + z_offset, int(g.z.leading), g.z_batch_stride, &zero, x + x_offset,
          int(g.x_leading), g.x_batch_stride, int(g.batch));
      if (status != 0)
        throw std::runtime_error("cublasSgemmStridedBatched failed with status " + std::to_string(status));
    }
  }

  std::string describe() const override {
    int64_t products = plan_.batch;
    for (const CublasGemmPlan::OuterBatch& dim : plan_.outer) products *= dim.extent;
    return "cublas sgemm " + std::to_string(products) + "x" + std::to_string(plan_.p) + "x" + std::to_string(plan_.q) +
           "x" + std::to_string(plan_.r);
  }

 private:
  MatmulProblem problem_;
  CublasGemmPlan plan_;
};

// ---- convolutions ----

// Packed row-major (what cuDNN's filter descriptor describes); dims of extent 1 may have any stride.
bool packed(const TensorLayout& layout) {
  int64_t expected = 1;
  for (size_t dim = layout.dims.size(); dim-- > 0;) {
    if (layout.dims[dim] > 1 && layout.strides[dim] != expected) return false;
    expected *= layout.dims[dim];
  }
  return true;
}

class CudnnConvolutionCall : public LibraryCall {
 public:
  CudnnConvolutionCall(const ConvolutionProblem& problem, size_t output_bytes)
      : problem_(problem), output_bytes_(output_bytes), api_(*cudnn()) {}

  ~CudnnConvolutionCall() override {
    if (source_) api_.destroy_tensor(source_);
    if (destination_) api_.destroy_tensor(destination_);
    if (weights_) api_.destroy_filter(weights_);
    if (convolution_) api_.destroy_convolution(convolution_);
  }

  // Describes the problem to cuDNN and picks an algorithm; false (with the reason) when cuDNN cannot take it.
  bool build(std::string* reason) {
    const ConvolutionProblem& problem = problem_;
    size_t spatial = problem.stride.size();
    if (spatial < 1 || spatial > 3) return fail(reason, "not 1-3 spatial dims");
    if (!packed(problem.weights)) return fail(reason, "weights not packed");
    std::vector<int> padding, stride, dilation;
    // cuDNN takes 2-D and 3-D convolutions; a 1-D one is a 2-D one over a single row.
    bool one_dimensional = spatial == 1;
    if (one_dimensional) padding.push_back(0), stride.push_back(1), dilation.push_back(1);
    for (size_t j = 0; j < spatial; ++j) {
      // cuDNN pads both ends alike. Less padding after is the same problem while the windows that padding
      // would add do not reach a further output (fewer than a step short).
      int64_t before = problem.padding_before[j], after = problem.padding_after[j];
      if (after > before || before - after >= problem.stride[j]) return fail(reason, "uneven padding");
      padding.push_back(int(before));
      stride.push_back(int(problem.stride[j]));
      dilation.push_back(int(problem.dilation[j]));
    }
    auto dims_of = [&](const TensorLayout& layout, bool filter) {
      std::vector<int64_t> dims = layout.dims, strides = layout.strides;
      if (filter && problem.groups > 1) {  // [G, O/G, C/G, kernel...] -> [O, C/G, kernel...]
        dims[1] *= dims[0];
        strides[1] = strides[2] * dims[2];
        dims.erase(dims.begin());
        strides.erase(strides.begin());
      }
      if (one_dimensional) {
        dims.insert(dims.begin() + 2, 1);
        strides.insert(strides.begin() + 2, strides[2] * dims[3]);
      }
      return std::make_pair(dims, strides);
    };
    auto to_int = [](const std::vector<int64_t>& values, std::vector<int>* out) {
      for (int64_t value : values) {
        if (!fits_int(value)) return false;
        out->push_back(int(value));
      }
      return true;
    };
    auto describe_tensor = [&](const TensorLayout& layout, void** descriptor) {
      auto [dims, strides] = dims_of(layout, false);
      std::vector<int> dims32, strides32;
      if (!to_int(dims, &dims32) || !to_int(strides, &strides32)) return false;
      return api_.create_tensor(descriptor) == 0 &&
             api_.set_tensor(*descriptor, kCudnnFloat, int(dims32.size()), dims32.data(), strides32.data()) == 0;
    };
    if (!describe_tensor(problem.source, &source_) || !describe_tensor(problem.destination, &destination_))
      return fail(reason, "tensor descriptor refused");
    std::vector<int> filter_dims;
    if (!to_int(dims_of(problem.weights, true).first, &filter_dims) || api_.create_filter(&weights_) != 0 ||
        api_.set_filter(weights_, kCudnnFloat, kCudnnPackedFilter, int(filter_dims.size()), filter_dims.data()) != 0)
      return fail(reason, "filter descriptor refused");
    if (api_.create_convolution(&convolution_) != 0 ||
        api_.set_convolution(convolution_, int(padding.size()), padding.data(), stride.data(), dilation.data(),
                             kCudnnCrossCorrelation, kCudnnFloat) != 0 ||
        api_.set_group_count(convolution_, int(problem.groups)) != 0 ||
        api_.set_math_type(convolution_, kCudnnFmaMath) != 0)
      return fail(reason, "convolution descriptor refused");
    CudnnAlgorithmChoice choices[8];
    int found = 0, status = 0;
    switch (problem.pass) {
      case ConvolutionPass::Forward:
        status = api_.forward_algorithms(api_.handle, source_, weights_, convolution_, destination_, 8, &found, choices);
        break;
      case ConvolutionPass::BackwardData:
        status = api_.backward_data_algorithms(api_.handle, weights_, destination_, convolution_, source_, 8, &found,
                                               choices);
        break;
      case ConvolutionPass::BackwardWeights:
        status = api_.backward_filter_algorithms(api_.handle, source_, destination_, convolution_, weights_, 8, &found,
                                                 choices);
        break;
    }
    if (status != 0) return fail(reason, std::string("no algorithms: ") + api_.error_text(status));
    for (int index = 0; index < found; ++index) {
      const CudnnAlgorithmChoice& choice = choices[index];
      if (choice.status != 0 || choice.math_type != kCudnnFmaMath || choice.memory > kMostWorkspaceBytes) continue;
      algorithm_ = choice.algorithm;
      workspace_bytes_ = choice.memory;
      return true;
    }
    return fail(reason, "no float32 FMA algorithm");
  }

  void run(void* const* buffers) const override {
    CudaContext& context = CudaContext::instance();
    if (problem_.zero_output_first) context.zero(buffers[0], output_bytes_);
    // Freed right after queueing: the allocator hands the block only to work queued later on the same stream.
    void* workspace = workspace_bytes_ ? context.allocate(workspace_bytes_) : nullptr;
    const float one = 1, zero = 0;
    const float* source = address(buffers, problem_.source);
    const float* weights = address(buffers, problem_.weights);
    const float* destination = address(buffers, problem_.destination);
    int status = 0;
    switch (problem_.pass) {
      case ConvolutionPass::Forward:
        status = api_.forward(api_.handle, &one, source_, source, weights_, weights, convolution_, algorithm_, workspace,
                              workspace_bytes_, &zero, destination_, address(buffers, problem_.destination));
        break;
      case ConvolutionPass::BackwardData:
        status = api_.backward_data(api_.handle, &one, weights_, weights, destination_, destination, convolution_,
                                    algorithm_, workspace, workspace_bytes_, &zero, source_,
                                    address(buffers, problem_.source));
        break;
      case ConvolutionPass::BackwardWeights:
        status = api_.backward_filter(api_.handle, &one, source_, source, destination_, destination, convolution_,
                                      algorithm_, workspace, workspace_bytes_, &zero, weights_,
                                      address(buffers, problem_.weights));
        break;
    }
    if (workspace) context.release(workspace, workspace_bytes_);
    if (status != 0)
      throw std::runtime_error(std::string("cuDNN convolution ") + convolution_pass_name(problem_.pass) +
                               " failed: " + api_.error_text(status));
  }

  std::string describe() const override {
    return std::string("cudnn convolution ") + convolution_pass_name(problem_.pass) + " " +
           shape_to_string(problem_.source.dims) + " * " + shape_to_string(problem_.weights.dims) + " -> " +
           shape_to_string(problem_.destination.dims) + " (algorithm " + std::to_string(algorithm_) + ")";
  }

 private:
  static bool fail(std::string* reason, const std::string& text) {
    *reason = text;
    return false;
  }

  ConvolutionProblem problem_;
  size_t output_bytes_;
  const CudnnApi& api_;
  void *source_ = nullptr, *weights_ = nullptr, *destination_ = nullptr, *convolution_ = nullptr;
  int algorithm_ = 0;
  size_t workspace_bytes_ = 0;
};

int64_t multiply_adds(const Contraction& contraction) {
  int64_t total = 1;
  for (const auto& [name, extent] : contraction.extents) total *= extent;
  return total;
}

std::shared_ptr<const LibraryCall> convolution_call(const ConvolutionProblem& problem, const Contraction& contraction,
                                                    std::string* reason) {
  if (problem.bias || !problem.post_ops.empty()) {
    *reason = "post-ops";
    return nullptr;
  }
  if (!cudnn()) {
    *reason = cudnn_unavailable_reason();
    return nullptr;
  }
  auto call = std::make_shared<CudnnConvolutionCall>(problem, size_t(shape_numel(contraction.output.shape)) * sizeof(float));
  if (!call->build(reason)) return nullptr;
  return call;
}

std::shared_ptr<const LibraryCall> create_call(const Contraction& contraction, std::string* reason) {
  if (auto problem = as_convolution(contraction)) return convolution_call(*problem, contraction, reason);
  if (auto problem = as_matmul(contraction)) {
    std::optional<CublasGemmPlan> plan = plan_cublas_gemm(*problem);
    if (!plan) {
      *reason = "not one strided-batched gemm";
      return nullptr;
    }
    if (!cublas()) {
      *reason = cublas_unavailable_reason();
      return nullptr;
    }
    return std::make_shared<CublasMatmulCall>(*problem, *plan);
  }
  if (auto problem = as_pointwise_weight_gradient(contraction)) return convolution_call(*problem, contraction, reason);
  *reason = "neither a matrix product nor a convolution";
  return nullptr;
}

}  // namespace

std::optional<CublasGemmPlan> plan_cublas_gemm(const MatmulProblem& problem) {
  if (problem.bias || !problem.post_ops.empty()) return std::nullopt;
  const TensorLayout &a = problem.left, &b = problem.right, &c = problem.output;
  size_t rank = c.dims.size();
  if (rank < 2 || a.dims.size() != rank || b.dims.size() != rank) return std::nullopt;
  CublasGemmPlan plan;
  // Batch dims with more than one product: the innermost is cuBLAS's strided batch, the others loop outside.
  // An operand with one item along a dim is the same along it (stride 0).
  std::vector<CublasGemmPlan::OuterBatch> batch_dims;
  for (size_t dim = 0; dim + 2 < rank; ++dim) {
    if (c.dims[dim] == 1) continue;
    if ((a.dims[dim] != 1 && a.dims[dim] != c.dims[dim]) || (b.dims[dim] != 1 && b.dims[dim] != c.dims[dim]))
      return std::nullopt;
    batch_dims.push_back({c.dims[dim], c.strides[dim], a.dims[dim] > 1 ? a.strides[dim] : 0,
                          b.dims[dim] > 1 ? b.strides[dim] : 0});
  }
  if (!batch_dims.empty()) {
    const CublasGemmPlan::OuterBatch& inner = batch_dims.back();
    plan.batch = inner.extent;
    plan.x_batch_stride = inner.x_stride, plan.y_batch_stride = inner.y_stride, plan.z_batch_stride = inner.z_stride;
    batch_dims.pop_back();
  }
  plan.outer = batch_dims;  // y: left, z: right until the orientation below swaps them
  int64_t m = c.dims[rank - 2], n = c.dims[rank - 1], k = a.dims[rank - 1];
  int64_t cm = c.strides[rank - 2], cn = c.strides[rank - 1], am = a.strides[rank - 2], ak = a.strides[rank - 1],
          bk = b.strides[rank - 2], bn = b.strides[rank - 1];
  std::optional<CublasGemmPlan::Operand> y, z;
  if ((cn == 1 || n == 1) && (m == 1 || cm >= n)) {
    // C^T (n x m, leading dimension cm) = B^T (n x k) * A^T (k x m).
    plan.p = n, plan.q = m, plan.x_leading = m == 1 ? std::max<int64_t>(n, 1) : cm;
    y = column_major(n, k, bn, bk);
    z = column_major(k, m, ak, am);
    plan.y_is_left = false;
    std::swap(plan.y_batch_stride, plan.z_batch_stride);
    for (CublasGemmPlan::OuterBatch& dim : plan.outer) std::swap(dim.y_stride, dim.z_stride);
  } else if ((cm == 1 || m == 1) && (n == 1 || cn >= m)) {
    // C (m x n, leading dimension cn) = A (m x k) * B (k x n).
    plan.p = m, plan.q = n, plan.x_leading = n == 1 ? std::max<int64_t>(m, 1) : cn;
    y = column_major(m, k, am, ak);
    z = column_major(k, n, bk, bn);
  } else {
    return std::nullopt;
  }
  if (!y || !z) return std::nullopt;
  plan.r = k, plan.y = *y, plan.z = *z;
  for (int64_t value : {plan.p, plan.q, plan.r, plan.batch, plan.x_leading, plan.y.leading, plan.z.leading})
    if (!fits_int(value)) return std::nullopt;
  return plan;
}

std::shared_ptr<const LibraryCall> cuda_library_call(const Contraction& contraction) {
  if (contraction.dtype != DType::Float32 || multiply_adds(contraction) < kMinimumMultiplyAdds) return nullptr;
  // Made for the canonical form, as on the CPU (libraries/cpu/onednn_backend.cc): every step of a loop over x[i]
  // shares one call; the wrapper adds the slice's offset to the device address.
  CanonicalContraction canonical = canonical_contraction(contraction);
  if (!canonical.identity())
    return call_with_slots(cuda_library_call(canonical.contraction), canonical, int(sizeof(float)));
  // Calls are cached by the contraction's own description, which fixes every shape, stride and offset.
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const LibraryCall>> calls;
  std::string description = contraction.describe();
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = calls.find(description);
    if (found != calls.end()) return found->second;
  }
  std::string reason;
  std::shared_ptr<const LibraryCall> call = create_call(contraction, &reason);
  if (call)
    log_message(LogLevel::Info, "library call " + call->describe() + " for " + description);
  else
    log_message(LogLevel::Info, "no CUDA library call for " + description + ": " + reason);
  std::lock_guard<std::mutex> lock(mutex);
  calls[description] = call;
  return call;
}

void install_cuda_contraction_backend() { set_cuda_contraction_backend(&cuda_library_call); }

}  // namespace metajit
