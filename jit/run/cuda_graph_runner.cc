#include "jit/run/cuda_graph_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>

#include "core/executor.h"
#include "core/stats.h"
#include "jit/codegen/code_ops/code_kernel.h"
#include "jit/ir/launch_offsets.h"
#include "jit/plan/buffer_lifetimes.h"
#include "jit/plan/plan_cache.h"
#include "jit/run/cuda_context.h"
#include "jit/run/cuda_emulator.h"
#include "jit/run/cuda_emulator_device.h"
#include "jit/run/cuda_stream_device.h"
#include "jit/run/graph_executor.h"
#include "jit/run/run_loop.h"
#include "jit/toolchain/compiler.h"
#include "jit/toolchain/cuda_binary_cache.h"
#include "jit/toolchain/kernel_cache.h"
#include "jit/toolchain/kernel_dump.h"
#include "meta_ops/code.h"

namespace metajit {
namespace {

std::atomic<CudaExecution> execution_{CudaExecution::Off};
std::atomic<bool> context_created_{false};

// The emulator runs a block's threads one after another: few blocks keep tests fast and the strides exercised.
constexpr int64_t kEmulatedBlocks = 4;

// The CUDA kernels of a fresh plan: rendered from the lowered IR (or the Code op's cuda_src) and keyed for the
// binary cache. A Code op without cuda_src runs its C++ source on the CPU instead (as in Jittor): its inputs
// are copied to the host, and its outputs to the GPU when a later kernel reads them.
void render_for_cuda(std::vector<PlannedKernel>& kernels, const CudaTarget& target, bool with_keys) {
  const std::string dump_directory = KernelCache::instance().dump_directory();
  for (PlannedKernel& kernel : kernels) {
    const NodePtr& output = kernel.lowered.output;
    if (kernel.code) {
      const CodeOp& op = *static_cast<const CodePayload&>(*output->payload).op;
      if (op.cuda_source.empty()) {
        kernel.on_host = true;
        kernel.rendered = render_code_kernel(op, output->inputs);
        kernel.key = KernelCache::instance().key_for(kernel.rendered.source);
        continue;
      }
      kernel.cuda = render_code_cuda_kernel(op, output->inputs);
    } else if ((kernel.library && !kernel.epilogue) || kernel.host_operation) {
      continue;  // the library call is all of it; host work runs on the CPU
    } else {     // position-independent, as on the CPU: x[0]'s kernel serves x[t] with its offset added at launch
      IrKernel position_independent = kernel.lowered.kernel;
      kernel.buffer_offsets = move_constant_offsets_to_launch(position_independent);
      kernel.cuda = render_cuda(position_independent);
      kernel.cuda.header_comment += describe_launch_offsets(position_independent, kernel.buffer_offsets);
    }
    if (with_keys) kernel.cuda_key = CudaBinaryCache::instance().key_for(kernel.cuda.source, target);
    if (!dump_directory.empty())
      dump_cuda_kernel(dump_directory, with_keys ? kernel.cuda_key : CudaBinaryCache::instance().key_for(kernel.cuda.source, target),
                       kernel.cuda.header_comment + kernel.cuda.source);
  }
}

int prepare_binaries(const std::vector<PlannedKernel>& kernels, const CudaTarget& target) {
  std::vector<CudaKernelRequest> requests;
  for (const PlannedKernel& kernel : kernels)
    if (!kernel.cuda_key.empty() && !kernel.on_host)
      requests.push_back({kernel.cuda_key, kernel.cuda.source, kernel.cuda.header_comment});
  return CudaBinaryCache::instance().prepare(requests, target);
}

}  // namespace

int precompile_cuda(const std::vector<NodePtr>& targets, const CudaTarget& target) {
  std::vector<PlannedKernel> kernels = plan_kernels(targets, /*backend=*/nullptr, /*render_cpu_source=*/false);
  render_for_cuda(kernels, target, /*with_keys=*/true);
  return prepare_binaries(kernels, target);
}

void use_device_memory(CudaExecution kind) {
  if (kind == CudaExecution::Off) return;
  DeviceMemory* wanted = kind == CudaExecution::Gpu ? static_cast<DeviceMemory*>(&CudaContext::instance())
                                                    : &emulated_device_memory();
  if (kind == CudaExecution::Gpu) context_created_ = true;
  DeviceMemory* current = device_memory();
  if (current && current != wanted)
    throw std::invalid_argument(
        std::string("cannot switch CUDA execution to the ") + (kind == CudaExecution::Gpu ? "GPU" : "emulator") +
        ": this process already keeps values in the " + (kind == CudaExecution::Gpu ? "emulator's" : "GPU's") +
        " memory; use one of them per process");
  set_device_memory(wanted);
}

void set_cuda_execution(CudaExecution mode) {
  use_device_memory(mode);
  execution_ = mode;
}

CudaExecution cuda_execution() { return execution_; }

void run_on_cuda(const std::vector<NodePtr>& targets) {
  auto planning_start = std::chrono::steady_clock::now();
  CudaTarget target;
  if (execution_ == CudaExecution::Gpu) target = CudaContext::instance().target();
  GraphSignature signature = graph_signature(targets);
  signature.text.insert(0, execution_ == CudaExecution::Gpu ? "cuda " + target.name() + "\n" : "cuda emulator\n");
  std::shared_ptr<const Plan> plan = PlanCache::instance().find(signature.text);
  if (!plan) {
    // cuBLAS and cuDNN take the contractions they can on a GPU; the emulator runs every one as a kernel.
    ContractionBackend backend = execution_ == CudaExecution::Gpu ? cuda_contraction_backend() : nullptr;
    std::vector<PlannedKernel> kernels = plan_kernels(targets, backend, /*render_cpu_source=*/false);
    render_for_cuda(kernels, target, /*with_keys=*/execution_ == CudaExecution::Gpu);
    if (execution_ == CudaExecution::Gpu) prepare_binaries(kernels, target);  // a new plan: all at once
    plan = PlanCache::instance().insert(signature.text, make_plan(signature, std::move(kernels)));
  }
  stats().planning_nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - planning_start).count();
  RunValues values(RunValues::Where::OnNodes);
  std::vector<uint8_t> releasable = releasable_buffers(plan->lifetimes, signature.nodes, !active_capture());
  if (execution_ == CudaExecution::Gpu) {
    CudaStreamDevice device;
    run_plan(*plan, signature.nodes, device, values, &releasable);
  } else {
    CudaEmulatorDevice device(CudaEmulatorDevice::Memory::EmulatedDevice, kEmulatedBlocks);
    run_plan(*plan, signature.nodes, device, values, &releasable);
  }
  if (CapturedRun* capture = active_capture()) {
    capture->plan = plan;
    capture->signature = std::move(signature);
    capture->where = execution_;
  }
}

void run_plan_on_cuda(const Plan& plan, const std::vector<NodePtr>& nodes, const std::vector<uint8_t>& releasable,
                      CudaExecution where) {
  if (where != execution_)
    throw std::invalid_argument("mj.trace: the traced plan ran on the " +
                                std::string(where == CudaExecution::Gpu ? "GPU" : "CUDA emulator") +
                                ", where kernels no longer run; trace the function again");
  RunValues values(RunValues::Where::OnNodes);
  if (where == CudaExecution::Gpu) {
    CudaStreamDevice device;
    run_plan(plan, nodes, device, values, &releasable);
  } else {
    CudaEmulatorDevice device(CudaEmulatorDevice::Memory::EmulatedDevice, kEmulatedBlocks);
    run_plan(plan, nodes, device, values, &releasable);
  }
}

std::vector<StoragePtr> emulate_cuda(const std::vector<NodePtr>& targets, int64_t max_blocks) {
  GraphSignature signature = graph_signature(targets);
  // Not rendered to C++: the kernels keep no launch offsets, their CUDA source reads each buffer from its start.
  std::vector<PlannedKernel> kernels = plan_kernels(targets, /*backend=*/nullptr, /*render_cpu_source=*/false,
                                                    /*multiple_outputs=*/false);
  for (PlannedKernel& kernel : kernels) {
    const NodePtr& output = kernel.lowered.output;
    if (kernel.host_operation) continue;
    kernel.cuda = kernel.code
                      ? render_code_cuda_kernel(*static_cast<const CodePayload&>(*output->payload).op, output->inputs)
                      : render_cuda(kernel.lowered.kernel);
  }
  std::shared_ptr<const Plan> plan = make_plan(signature, std::move(kernels));
  CudaEmulatorDevice device(CudaEmulatorDevice::Memory::Host, max_blocks);
  RunValues values(RunValues::Where::KeptAside);
  run_plan(*plan, signature.nodes, device, values);
  std::vector<StoragePtr> results;
  for (const NodePtr& target : targets) {
    if (!values.computed(*target))
      throw std::logic_error("CUDA emulation: " + target->op_name() + " was neither computed nor emulated");
    results.push_back(values.value(*target));
  }
  return results;
}

void synchronize_cuda() {
  if (context_created_) CudaContext::instance().synchronize();
}

void forget_cuda_kernels_in_memory() {
  CudaBinaryCache::instance().clear_memory();
  if (context_created_) CudaContext::instance().forget_functions();
}

void release_cached_device_memory() {
  if (context_created_) CudaContext::instance().release_cached_blocks();
}

}  // namespace metajit
