#include "jit/run/cuda_stream_device.h"

#include <algorithm>
#include <string>

#include "jit/codegen/code_ops/code_kernel.h"
#include "jit/run/cuda_context.h"
#include "jit/toolchain/compiler.h"
#include "jit/toolchain/cuda_binary_cache.h"
#include "meta_ops/code.h"

namespace metajit {
namespace {

// Grid-stride kernels are correct with any grid. A scalar one (an element per thread and step) is given at most
// this many blocks per multiprocessor, which ran faster on a GPU than a block per 256 elements; kernels doing more
// per block (unrolled elements, a block per row or output) get every block they need, where a cap gained nothing.
constexpr int64_t kBlocksPerMultiprocessor = 32;
constexpr int64_t kMostBlocks = 0x7fffffff;  // the grid's x dimension

// A Code op's compile error is the user's to fix; a generated kernel's is a metajit bug, shown with its source.
std::string describe_cuda_compile_error(const PlannedKernel& kernel, const Node& output, const std::string& log) {
  if (kernel.code)
    if (auto* payload = dynamic_cast<const CodePayload*>(output.payload.get()))
      return describe_code_compile_error(*payload->op, log, /*cuda=*/true);
  return "while computing " + output.op_name() + " created at " + output.provenance.to_string() +
         ":\ninternal error: generated CUDA kernel failed to compile (this is a metajit bug; please report it with "
         "this message)\n" +
         log + "\n--- kernel source ---\n" + kernel.cuda.header_comment + numbered_lines(kernel.cuda.source);
}

}  // namespace

StoragePtr CudaStreamDevice::allocate(size_t bytes) { return std::make_shared<Storage>(bytes, Storage::OnDevice{}); }

void* CudaStreamDevice::buffer(Storage& storage) { return storage.device_data(); }

void CudaStreamDevice::copy_to_device(void* device, const void* host, size_t bytes) {
  CudaContext::instance().copy_to_device(device, host, bytes);
}

void CudaStreamDevice::copy_to_host(void* host, const void* device, size_t bytes) {
  CudaContext::instance().copy_to_host(host, device, bytes);
}

// Every launch of the kernel, in order, with the kernel's binary loaded on its first use in the process.
bool CudaStreamDevice::launch_kernel(const PlannedKernel& kernel, const Node& output,
                                     const std::vector<void*>& buffers) {
  CudaContext& context = CudaContext::instance();
  int64_t most_blocks = int64_t(context.device().multiprocessors) * kBlocksPerMultiprocessor;
  bool launched = false;
  for (const CudaLaunch& launch : kernel.cuda.launches) {
    if (launch.work_items <= 0) continue;
    void* function = context.loaded_function(kernel.cuda_key, launch.entry);
    if (!function) {
      CachedCudaBinary binary;
      try {
        binary = CudaBinaryCache::instance().get(kernel.cuda_key, kernel.cuda.source, kernel.cuda.header_comment,
                                                 context.target());
      } catch (const CompileError& error) {
        throw CompileError(describe_cuda_compile_error(kernel, output, error.what()));
      } catch (const MissingKernelError& error) {
        throw MissingKernelError(std::string(error.what()) + "; it computes " + output.op_name() + " " +
                                 shape_to_string(output.shape) + " created at " + output.provenance.to_string());
      }
      function = context.load_function(kernel.cuda_key, binary.binary, launch.entry);
    }
    bool scalar = !launch.block_per_item && launch.items_per_thread == 1;
    int64_t blocks = std::min(launch.blocks_needed(), scalar ? most_blocks : kMostBlocks);
    context.launch(function, blocks, kCudaBlockSize, buffers);
    launched = true;
  }
  return launched;
}

void CudaStreamDevice::run_library_call(const LibraryCall& call, void* const* buffers) { call.run(buffers); }

void CudaStreamDevice::synchronize() { CudaContext::instance().synchronize(); }

}  // namespace metajit
