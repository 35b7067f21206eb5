// What the planner hands a vendor library and what the library gives back: a contraction described as plain data
// (out[f(v)] (+)= sum of left[g(v)] * right[h(v)] with affine indices, then element-wise post-ops) and the call a
// backend makes of it, with the hooks that scope one run's calls. It sits below the planner and the libraries and
// above core only, so a runtime that runs exported plans (runtime/) rebuilds library calls with no compiler linked.
// It must not know how a contraction is found in the IR (jit/plan/contraction_matching.h does).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace metajit {

// sum(coefficient * variable) + constant over the kernel's loop variables.
struct AffineIndex {
  std::map<std::string, int64_t> terms;  // no zero coefficients, no extent-1 variables
  int64_t constant = 0;
  bool uses(const std::string& variable) const { return terms.count(variable) != 0; }
  // "" unless the index is exactly one variable with coefficient 1 and no constant.
  std::string single_variable() const;
};

struct TensorAccess {
  int buffer = -1;                       // kernel buffer (0 is the kernel's output)
  Shape shape;                           // the tensor's logical shape, row-major in the buffer
  std::vector<AffineIndex> coordinates;  // one per dimension
  // Per dimension: an index outside [0, shape[d]) reads zero (operands) or is dropped (the output). Dimensions
  // that are not guarded are proven in range by the lowering.
  std::vector<bool> guarded;
  bool any_guarded() const;
  std::vector<int64_t> row_major_strides() const;
  AffineIndex flat_offset() const;  // sum of coordinate * stride (meaningful when nothing is guarded)
};

// Element-wise work right after the sum that a library applies to each result before writing it, in order:
// out = post_ops[n-1](...post_ops[0](sum)). A tensor operand (a bias, a residual, a per-channel scale) is read at
// each result's own loop variables; the backend decides which broadcasts it can take.
struct PostOp {
  enum class Kind { Add, Subtract, Multiply, Relu, Linear };  // Add, Subtract, Multiply: x op operand
  Kind kind = Kind::Relu;
  TensorAccess operand;         // Add, Subtract, Multiply: a buffer read at the output element's loop variables
  double scale = 1, shift = 0;  // Linear: x * scale + shift
  bool reads_tensor() const { return kind == Kind::Add || kind == Kind::Subtract || kind == Kind::Multiply; }
  std::string describe() const;
};

struct Contraction {
  // Every loop variable with an extent above 1. A loop variable v that the kernel reads only as v / k (a grouped
  // convolution's channel group) appears as two: "v/" (extent / k) and "v%" (k), so its indices stay affine.
  std::map<std::string, int64_t> extents;
  TensorAccess output, left, right;
  DType dtype = DType::Float32;  // of all three tensors
  std::vector<PostOp> post_ops;  // empty: the library writes the sum itself
  std::string describe() const;  // for logs and tests
};

// What the runtime library will run instead of (part of) a kernel.
class LibraryCall {
 public:
  virtual ~LibraryCall() = default;
  // buffers[0] is the contraction's output (zero-filled first where needed), the rest the kernel's buffers.
  virtual void run(void* const* buffers) const = 0;
  virtual std::string describe() const = 0;  // e.g. "onednn convolution forward (brgconv:avx512_core)"
  // A convolution's backward-weights pass: a run with one trains weights, which are replaced after it.
  virtual bool computes_weight_gradient() const { return false; }
};

// A backend (oneDNN in ops/) that may take a contraction; null when it cannot.
using ContractionBackend = std::shared_ptr<const LibraryCall> (*)(const Contraction& contraction);
void set_contraction_backend(ContractionBackend backend);
ContractionBackend contraction_backend();
// The CUDA runner's backend (cuBLAS/cuDNN in ops/), asked only while kernels run on a GPU; its calls take
// device pointers and queue their work on the CUDA context's stream.
void set_cuda_contraction_backend(ContractionBackend backend);
ContractionBackend cuda_contraction_backend();
// Library calls of one plan run may keep data derived from their input buffers for later calls of the same run
// (oneDNN keeps the copies it reordered into its own layouts: a convolution's weight gradient reads the input
// the forward call reordered). Within a run every buffer a call reads stays unchanged until the executor releases
// it (see the hook below); the executor holds a LibraryRunScope around each run, and when it closes the backend's hook
// drops what the calls kept. The scope first announces the run's calls to the backend's begin hook: it may keep data
// across runs (a convolution's weights in its own layout, for the next run of the same model) when no call of the run
// computes a gradient of those weights, which would replace them after the run.
using LibraryRunEndHook = void (*)();
void set_library_run_end_hook(LibraryRunEndHook hook);
using LibraryRunBeginHook = void (*)(const std::vector<const LibraryCall*>& calls);
void set_library_run_begin_hook(LibraryRunBeginHook hook);
class LibraryRunScope {
 public:
  explicit LibraryRunScope(const std::vector<const LibraryCall*>& calls);
  ~LibraryRunScope();
  LibraryRunScope(const LibraryRunScope&) = delete;
  LibraryRunScope& operator=(const LibraryRunScope&) = delete;
};
// The executor may hand a buffer back to the allocator before the run ends, once no later kernel of the run
// reads it (jit/buffer_lifetimes.h); its address can then hold another value within the same run, so the backend
// forgets what it kept for that address range.
using LibraryBufferReleasedHook = void (*)(const void* address, size_t bytes);
void set_library_buffer_released_hook(LibraryBufferReleasedHook hook);
void note_library_buffer_released(const void* address, size_t bytes);
// METAJIT_LOWERING=0 turns library lowering off (results must not change).
bool library_lowering_enabled();
void set_library_lowering_enabled(bool enabled);
// Which algorithm a lowered convolution uses (METAJIT_CONV_ALGORITHM). Winograd does a quarter to a half of the
// arithmetic of a direct 3x3 convolution (oneDNN's F(4x4, 3x3) on AVX-512 CPUs, metajit's own F(4x4, 3x3) or
// F(2x2, 3x3) elsewhere), at up to about ten times its rounding error (near 1e-5 of the output's scale in
// float32); the backend takes it only for the shapes it applies to.
enum class ConvolutionAlgorithm { Auto, Direct, Winograd };
ConvolutionAlgorithm convolution_algorithm();
void set_convolution_algorithm(ConvolutionAlgorithm algorithm);
const char* convolution_algorithm_name(ConvolutionAlgorithm algorithm);  // "auto", "direct", "winograd"
// Parses a name as above; nullopt for anything else.
std::optional<ConvolutionAlgorithm> parse_convolution_algorithm(const std::string& name);

}  // namespace metajit
