#include "jit/run/cuda_kernel_inspection.h"

#include "jit/codegen/code_ops/code_kernel.h"
#include "jit/plan/planner.h"
#include "jit/toolchain/compiler.h"
#include "jit/toolchain/nvrtc_compiler.h"

namespace metajit {

std::vector<InspectedCudaKernel> inspect_cuda_kernels(const std::vector<NodePtr>& targets, const CudaTarget& target) {
  bool have_nvrtc = NvrtcCompiler::unavailable_reason().empty();
  std::vector<InspectedCudaKernel> kernels;
  for (PlannedKernel& planned : plan_kernels(targets, /*backend=*/nullptr, /*render_cpu_source=*/true)) {
    if (planned.host_operation) continue;  // runs on the host: no CUDA kernel to show
    InspectedCudaKernel kernel;
    kernel.output = planned.lowered.output;
    kernel.code = planned.code;
    if (planned.code) {
      kernel.code_op = static_cast<const CodePayload&>(*kernel.output->payload).op;
      kernel.rendered = render_code_cuda_kernel(*kernel.code_op, kernel.output->inputs);
    } else {
      kernel.rendered = render_cuda(planned.lowered.kernel);
    }
    kernel.fused_ops = planned.lowered.kernel.fused_ops;
    kernel.key = have_nvrtc ? CudaBinaryCache::instance().key_for(kernel.rendered.source, target) : "";
    kernel.cached = kernel.key.empty() ? std::string() : CudaBinaryCache::instance().locate(kernel.key);
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

CachedCudaBinary compile_inspected_cuda_kernel(const InspectedCudaKernel& kernel, const CudaTarget& target) {
  const RenderedCudaKernel& rendered = kernel.rendered;
  std::string key = CudaBinaryCache::instance().key_for(rendered.source, target);
  try {
    return CudaBinaryCache::instance().get(key, rendered.source, rendered.header_comment, target);
  } catch (const CompileError& error) {
    if (kernel.code_op) throw CompileError(describe_code_compile_error(*kernel.code_op, error.what(), /*cuda=*/true));
    throw CompileError("while compiling the CUDA kernel for " + kernel.output->op_name() + " created at " +
                       kernel.output->provenance.to_string() +
                       ":\ninternal error: generated CUDA kernel failed to compile (this is a metajit bug; please "
                       "report it with this message)\n" +
                       error.what() + "\n--- kernel source ---\n" + rendered.header_comment +
                       numbered_lines(rendered.source));
  }
}

}  // namespace metajit
