// Contractions on the GPU through vendor libraries: matrix products through cuBLAS, convolutions (forward and
// both gradients) through cuDNN. They are read by the same library-independent classification as oneDNN's
// (jit/library_call/contraction_patterns.h), so a user's own reindex-written convolution goes to cuDNN too. Only
// float32 computed exactly in float32 (cuDNN's FMA kernels, no TF32) and with no post-ops: the planner then runs the
// plain sum here and the elementwise work after it as a generated kernel. A contraction either library
// declines, or every one when they cannot be loaded, stays a generated kernel.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "jit/library_call/contraction.h"
#include "jit/library_call/contraction_patterns.h"

namespace metajit {

// A matrix product as cuBLAS's strided-batched SGEMM computes it, in its column-major terms: X (p x q) =
// op(Y) (p x r) * op(Z) (r x q), `batch` times `batch_stride`s apart, once per index of the outer batch dims
// (dims that did not merge with the strided one: an operand broadcast along some of them only). Y is the
// problem's left operand, or its right when X is the output transposed (C^T = B^T A^T). Exposed for tests.
struct CublasGemmPlan {
  struct Operand {
    bool transposed = false;  // CUBLAS_OP_T: the stored matrix is r x p (Y) or q x r (Z)
    int64_t leading = 1;      // leading dimension of the stored matrix
  };
  struct OuterBatch {
    int64_t extent = 1;
    int64_t x_stride = 0, y_stride = 0, z_stride = 0;  // 0: that tensor is the same along the dim
  };
  int64_t p = 0, q = 0, r = 0, batch = 1;
  Operand y, z;
  int64_t x_leading = 1;
  int64_t x_batch_stride = 0, y_batch_stride = 0, z_batch_stride = 0;
  bool y_is_left = true;
  std::vector<OuterBatch> outer;
};
// Null when cuBLAS cannot take the product (a bias or post-op, an operand with no unit stride, sizes beyond int).
std::optional<CublasGemmPlan> plan_cublas_gemm(const MatmulProblem& problem);

std::shared_ptr<const LibraryCall> cuda_library_call(const Contraction& contraction);
// Makes cuda_library_call the CUDA runner's contraction backend (jit/library_call/contraction.h).
void install_cuda_contraction_backend();

}  // namespace metajit
