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

// Grid-stride kernels are correct with any grid. A scalar one (an element per thread and step) is given at most
// this many blocks per multiprocessor: on an H200 the 8-op chain took 0.18 ms so and 0.27 ms with a block per
// 256 elements. Kernels doing more per block (unrolled elements, a block per row or output) get every block
// they need: the unrolled chain took 0.132 ms so against 0.140 with the cap, softmax 0.136 against 0.137.
constexpr int64_t kBlocksPerMultiprocessor = 32;
constexpr int64_t kMostBlocks = 0x7fffffff;  // the grid's x dimension
// The emulator runs a block's threads one after another: few blocks keep tests fast and the strides exercised.
constexpr int64_t kEmulatedBlocks = 4;

// A Code op's compile error is the user's to fix; a generated kernel's is a metajit bug, shown with its source.
std::string describe_cuda_compile_error(const PlannedKernel& kernel, const Node& output, const std::string& log) {
  if (kernel.code)
    if (auto* payload = dynamic_cast<const CodePayload*>(output.payload.get()))
      return describe_code_compile_error(*payload->op, log, /*cuda=*/true);
  return "while computing " + output.op_name() + " created at " + output.provenance.to_string() +
         ":\ninternal error: generated CUDA kernel failed to compile (this is a metajit bug; please report it with "
         "this message)\n" + log + "\n--- kernel source ---\n" + kernel.cuda.header_comment +
         numbered_lines(kernel.cuda.source);
}

// "mul [8, 33] created at model.py:5": what a missing kernel computes, for its error.
std::string describe_kernel_output(const Node& output) {
  return output.op_name() + " " + shape_to_string(output.shape) + " created at " + output.provenance.to_string();
}

// Runs every launch of `kernel` over `buffers` (device pointers, in the kernel's parameter order).
void run_launches(const PlannedKernel& kernel, const Node& output, const std::vector<void*>& buffers) {
  if (execution_ == CudaExecution::Emulator) {
    try {
      emulate_cuda_kernel(kernel.cuda, buffers, kEmulatedBlocks);
    } catch (const MissingKernelError& error) {
      throw MissingKernelError(std::string(error.what()) + "; it computes " + describe_kernel_output(output));
    }
    return;
  }
  CudaContext& context = CudaContext::instance();
  int64_t most_blocks = int64_t(context.device().multiprocessors) * kBlocksPerMultiprocessor;
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
        throw MissingKernelError(std::string(error.what()) + "; it computes " + describe_kernel_output(output));
      }
      function = context.load_function(kernel.cuda_key, binary.binary, launch.entry);
    }
    bool scalar = !launch.block_per_item && launch.items_per_thread == 1;
    int64_t blocks = std::min(launch.blocks_needed(), scalar ? most_blocks : kMostBlocks);
    context.launch(function, blocks, kCudaBlockSize, buffers);
  }
}

// A Code op runs once for all its outputs; the first of them to be launched publishes every live one. Its
// data values go to the device with an error slot after them, which the kernel sets on an unknown name.
void launch_code(const PlannedKernel& kernel, const NodePtr& output, const std::vector<NodePtr>& inputs) {
  CodeLaunch launch = begin_code_launch(output, inputs, /*on_device=*/true);
  if (!launch.payload) return;
  const CodeOp& op = *launch.payload->op;
  std::vector<void*>& buffers = launch.buffers;
  std::vector<double> data = op.data_values;
  data.push_back(0);  // the error slot
  Storage data_storage(data.size() * sizeof(double), Storage::OnDevice{});
  DeviceMemory& memory = *device_memory();
  memory.copy_to_device(data_storage.device_data(), data.data(), data.size() * sizeof(double));
  buffers.push_back(data_storage.device_data());
  run_launches(kernel, *output, buffers);
  double error = 0;
  memory.copy_to_host(&error, static_cast<double*>(data_storage.device_data()) + op.data_values.size(), sizeof(error));
  if (error != 0)
    throw std::runtime_error("the " + op.what + " created at " + op.provenance.to_string() +
                             " read a data[\"name\"] that is not in its data (given: " + code_data_names(op) + ")");
  publish_code_outputs(*launch.payload, output, launch.storages);
}

// A kernel's buffers: its output, the further outputs of a kernel with several (siblings), then its inputs.
void launch_kernel(const PlannedKernel& kernel, const NodePtr& output, const std::vector<NodePtr>& siblings,
                   const std::vector<NodePtr>& inputs) {
  if (kernel.on_host)
    return run_code_on_host(output, inputs, host_kernel_function(kernel, *output), kernel.rendered.work_items);
  if (kernel.code) return launch_code(kernel, output, inputs);
  StoragePtr storage = allocate_result(*output, output->dtype, output->shape, /*on_device=*/true);
  std::vector<void*> buffers{storage->device_data()};
  std::vector<StoragePtr> sibling_storages;
  for (const NodePtr& sibling : siblings) {
    sibling_storages.push_back(allocate_result(*sibling, sibling->dtype, sibling->shape, /*on_device=*/true));
    buffers.push_back(sibling_storages.back()->device_data());
  }
  for (const NodePtr& input : inputs) {
    if (!input->storage) throw std::logic_error("kernel input " + input->op_name() + " was not computed");
    buffers.push_back(input->storage->device_data());
  }
  StoragePtr temporary;
  if (kernel.library) {
    if (kernel.epilogue) {  // the library writes a temporary; the epilogue kernel reads it as its last buffer
      temporary = std::make_shared<Storage>(size_t(output->numel()) * sizeof(float), Storage::OnDevice{});
      buffers[0] = temporary->device_data();
    }
    try {
      kernel.library->run(buffers.data());
    } catch (const std::exception& error) {
      throw std::runtime_error("while computing " + output->op_name() + " created at " + output->provenance.to_string() +
                               " with " + kernel.library->describe() + ": " + error.what());
    }
    stats().library_calls++;
    buffers[0] = storage->device_data();
    if (temporary) buffers.push_back(temporary->device_data());
  }
  if (!kernel.library || kernel.epilogue) {
    for (size_t index = 0; index < kernel.buffer_offsets.size(); ++index)
      buffers[index] = static_cast<char*>(buffers[index]) +
                       kernel.buffer_offsets[index] * int64_t(dtype_size(kernel.lowered.kernel.buffers[index].dtype));
    run_launches(kernel, *output, buffers);
  }
  publish_storage(*output, std::move(storage));
  for (size_t index = 0; index < siblings.size(); ++index)
    publish_storage(*siblings[index], std::move(sibling_storages[index]));
}

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
    } else if (kernel.library && !kernel.epilogue) {
      continue;  // the library call is all of it
    } else {  // position-independent, as on the CPU: x[0]'s kernel serves x[t] with its offset added at launch
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

// The GPU (or the CPU emulator of CUDA kernels) as a Device: kernels are queued on one stream; their binaries
// were prepared when the plan was made. As on the CPU (jit/plan/buffer_lifetimes.h), an intermediate goes back to
// the caching allocator after its last reader is queued; the one stream runs whatever reuses the block after
// that reader.
class CudaStreamDevice : public Device {
 public:
  void launch(const PlannedKernel& kernel, const NodePtr& output, const std::vector<NodePtr>& siblings,
              const std::vector<NodePtr>& inputs) override {
    launch_kernel(kernel, output, siblings, inputs);
    // A Code op run on the host counts its own; a library call alone launches no kernel of ours.
    if (!kernel.on_host && (!kernel.library || kernel.epilogue)) stats().kernels_launched++;
  }
  void synchronize() override { synchronize_cuda(); }
};

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
  CudaStreamDevice device;
  run_plan(*plan, signature.nodes, device);
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
