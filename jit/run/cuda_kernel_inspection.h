// mj.inspect(device="cuda"): the CUDA kernels that computing some values would launch, rendered for one
// architecture, and compiling one of them on request. Needs no GPU. It runs nothing: it must not compute or
// publish a value. The kernels are rendered from the IR as lowered, without library calls.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/node.h"
#include "jit/codegen/cuda/cuda_renderer.h"
#include "jit/toolchain/cuda_binary_cache.h"
#include "meta_ops/code.h"

namespace metajit {

struct InspectedCudaKernel {
  std::string key;                     // for the CUDA binary cache; "" without NVRTC (a key names the compiler)
  bool code = false;                   // a Code op's cuda_src, not a generated kernel
  std::vector<std::string> fused_ops;  // op, shape, created at
  RenderedCudaKernel rendered;
  std::string cached;  // where the binary cache holds its binary; "" when nowhere
  NodePtr output;      // what it computes, for errors
  std::shared_ptr<const CodeOp> code_op;
};

std::vector<InspectedCudaKernel> inspect_cuda_kernels(const std::vector<NodePtr>& targets, const CudaTarget& target);

// The kernel's binary for `target`, through the binary cache. A Code op's compile error is shown against the
// user's cuda_src; a generated kernel that fails is a metajit bug and is reported with its source.
CachedCudaBinary compile_inspected_cuda_kernel(const InspectedCudaKernel& kernel, const CudaTarget& target);

}  // namespace metajit
