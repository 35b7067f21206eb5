#include "jit/run/cpu_device.h"

#include <cstring>
#include <string>

#include "core/thread_pool.h"
#include "jit/codegen/code_ops/code_kernel.h"
#include "jit/toolchain/compiler.h"
#include "meta_ops/code.h"

namespace metajit {
namespace {

// A Code op's compile error is the user's to fix: show it against their own source. A generated kernel that
// fails to compile is our bug: show everything needed to report it.
std::string describe_compile_error(const PlannedKernel& kernel, const Node& output, const std::string& diagnostics) {
  if (kernel.code) {
    auto* payload = dynamic_cast<const CodePayload*>(output.payload.get());
    if (payload) return describe_code_compile_error(*payload->op, diagnostics);
  }
  return "while computing " + output.op_name() + " created at " + output.provenance.to_string() +
         ":\ninternal error: generated kernel failed to compile (this is a metajit bug; please report it with this "
         "message)\n" +
         diagnostics + "\n--- kernel source ---\n" + kernel.rendered.header_comment +
         numbered_lines(kernel.rendered.source);
}

}  // namespace

KernelFunction host_kernel_function(const PlannedKernel& kernel, const Node& output) {
  try {
    return KernelCache::instance().get(kernel.key, kernel.rendered.source, kernel.rendered.header_comment);
  } catch (const CompileError& error) {
    throw CompileError(describe_compile_error(kernel, output, error.what()));
  } catch (const MissingKernelError& error) {
    throw MissingKernelError(std::string(error.what()) + "; it computes " + output.op_name() + " " +
                             shape_to_string(output.shape) + " created at " + output.provenance.to_string());
  }
}

CpuDevice::CpuDevice(const Plan& plan) {
  KernelCache& cache = KernelCache::instance();
  // Only kernels not yet in memory go to prepare(): copying every source each sync is wasted in a steady loop.
  std::vector<KernelRequest> sources;
  for (const PlannedKernel& kernel : plan.kernels)
    if (!kernel.key.empty() && !cache.in_memory(kernel.key))
      sources.push_back({kernel.key, kernel.rendered.source, kernel.rendered.header_comment});
  if (!sources.empty()) cache.prepare(sources);
  std::vector<const LibraryCall*> library_calls;
  for (const PlannedKernel& kernel : plan.kernels)
    if (kernel.library) library_calls.push_back(kernel.library.get());
  library_run_ = std::make_unique<LibraryRunScope>(library_calls);
}

StoragePtr CpuDevice::allocate(size_t bytes) { return std::make_shared<Storage>(bytes); }

void* CpuDevice::buffer(Storage& storage) { return storage.data(); }

void CpuDevice::copy_to_device(void* device, const void* host, size_t bytes) { std::memcpy(device, host, bytes); }

void CpuDevice::copy_to_host(void* host, const void* device, size_t bytes) { std::memcpy(host, device, bytes); }

// Each thread of the pool runs its share [begin, end) of the kernel's work items: its outer loop's iterations, or
// a Code op's cpu_parallel items (one when it has none).
bool CpuDevice::launch_kernel(const PlannedKernel& kernel, const Node& output, const std::vector<void*>& buffers) {
  KernelFunction function = host_kernel_function(kernel, output);
  int64_t work = kernel.rendered.work_items;
  if (work <= 0) return false;
  parallel_for(work, kernel.rendered.grain, [&](int64_t begin, int64_t end) { function(buffers.data(), begin, end); });
  return true;
}

void CpuDevice::run_library_call(const LibraryCall& call, void* const* buffers) {
  use_thread_count_in_libraries();
  call.run(buffers);
}

}  // namespace metajit
