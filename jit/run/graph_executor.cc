// The CPU runner: runs a plan's kernels (from the plan cache, or planned by jit/plan/planner.h) on the thread
// pool, with the METAJIT_CHECK_NAN checks, kernel profiling and the Code-op launch helpers both runners share.
#include "jit/run/graph_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <stdexcept>
#include <unordered_set>

#include "core/flags.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "jit/codegen/code_ops/code_kernel.h"
#include "jit/plan/buffer_lifetimes.h"
#include "jit/plan/plan_cache.h"
#include "jit/run/cuda_graph_runner.h"
#include "jit/run/run_loop.h"
#include "jit/toolchain/compiler.h"
#include "jit/toolchain/kernel_cache.h"

namespace metajit {
namespace {

std::atomic<bool> profiling_{false};
std::atomic<bool> check_non_finite_{flag_boolean(Flag::CheckNan)};

// Index of the first NaN or infinity in a buffer of `dtype`, or -1 (also for non-floating dtypes).
int64_t first_non_finite(const void* data, DType dtype, int64_t count) {
  if (dtype == DType::Float32) {
    const float* values = static_cast<const float*>(data);
    for (int64_t index = 0; index < count; ++index)
      if (!std::isfinite(values[index])) return index;
  } else if (dtype == DType::Float64) {
    const double* values = static_cast<const double*>(data);
    for (int64_t index = 0; index < count; ++index)
      if (!std::isfinite(values[index])) return index;
  } else if (dtype == DType::Float16) {
    const uint16_t* values = static_cast<const uint16_t*>(data);
    for (int64_t index = 0; index < count; ++index)
      if ((values[index] & 0x7c00) == 0x7c00) return index;  // exponent all ones: inf or NaN
  }
  return -1;
}

std::string describe_value(const void* data, DType dtype, int64_t index) {
  double value = dtype == DType::Float32   ? static_cast<const float*>(data)[index]
                 : dtype == DType::Float64 ? static_cast<const double*>(data)[index]
                                           : ((static_cast<const uint16_t*>(data)[index] & 0x3ff) ? NAN : INFINITY);
  if (std::isnan(value)) return "NaN";
  if (dtype == DType::Float16) return "an infinity";
  return value > 0 ? "+inf" : "-inf";
}

// Raises when a freshly computed value holds a NaN or infinity, unless one of the kernel's inputs already did
// (then the first place it appeared was a user-provided value, which is named instead).
void check_output(const PlannedKernel& kernel, const Node& output, const std::vector<NodePtr>& inputs) {
  if (!is_floating(output.dtype) || !output.storage) return;
  int64_t index = first_non_finite(output.storage->data(), output.dtype, output.numel());
  if (index < 0) return;
  std::string message = "METAJIT_CHECK_NAN: " + output.op_name() + " " + shape_to_string(output.shape) +
                        " created at " + output.provenance.to_string() + " produced " +
                        describe_value(output.storage->data(), output.dtype, index) + " at flat index " +
                        std::to_string(index);
  for (size_t position = 0; position < inputs.size(); ++position) {
    const Node& input = *inputs[position];
    if (!is_floating(input.dtype) || !input.storage) continue;
    int64_t bad = first_non_finite(input.storage->data(), input.dtype, input.numel());
    if (bad >= 0) {
      message += "; its input " + input.op_name() + " " + shape_to_string(input.shape) + " (created at " +
                 input.provenance.to_string() + ") already held " +
                 describe_value(input.storage->data(), input.dtype, bad) + " at flat index " + std::to_string(bad);
      break;
    }
  }
  if (kernel.library) message += "\nlibrary call: " + kernel.library->describe();
  if (!kernel.lowered.kernel.fused_ops.empty()) {
    message += "\nops computed in this kernel (op, shape, created at):";
    for (const std::string& op : kernel.lowered.kernel.fused_ops) message += "\n  " + op;
  }
  throw NonFiniteError(message);
}
std::mutex profile_mutex_;
std::unordered_map<std::string, KernelProfile> profile_;

void record_profile(const PlannedKernel& kernel, const Node& output, double seconds) {
  // CUDA kernels have no CPU key: their binary's key, or under the emulator (no binaries) their source.
  const std::string& key = !kernel.key.empty() ? kernel.key : !kernel.cuda_key.empty() ? kernel.cuda_key : kernel.cuda.source;
  std::string identity = key + "|" + (kernel.library ? kernel.library->describe() : std::string());
  std::lock_guard<std::mutex> lock(profile_mutex_);
  KernelProfile& entry = profile_[identity];
  if (entry.launches == 0) {
    entry.key = kernel.key.empty() ? kernel.cuda_key : kernel.key;
    entry.name = (kernel.library ? kernel.library->describe() + (kernel.epilogue ? " + epilogue" : "") + ": " : "") +
                 output.op_name() + " " + shape_to_string(output.shape) + " at " + output.provenance.to_string();
    int further_outputs = -1;
    for (const IrBuffer& buffer : kernel.lowered.kernel.buffers) further_outputs += buffer.is_output ? 1 : 0;
    if (!kernel.library && further_outputs > 0)
      entry.name += " (and " + std::to_string(further_outputs) + " more output" + (further_outputs > 1 ? "s)" : ")");
  }
  entry.launches++;
  entry.seconds += seconds;
}

// A Code op's compile error is the user's to fix: show it against their own source. A generated kernel that
// fails to compile is our bug: show everything needed to report it.
std::string describe_compile_error(const PlannedKernel& kernel, const Node& output, const std::string& diagnostics) {
  if (kernel.code) {
    auto* payload = dynamic_cast<const CodePayload*>(output.payload.get());
    if (payload) return describe_code_compile_error(*payload->op, diagnostics);
  }
  return "while computing " + output.op_name() + " created at " + output.provenance.to_string() +
         ":\ninternal error: generated kernel failed to compile (this is a metajit bug; please report it with this "
         "message)\n" + diagnostics + "\n--- kernel source ---\n" + kernel.rendered.header_comment +
         numbered_lines(kernel.rendered.source);
}

}  // namespace

StoragePtr allocate_result(const Node& output, DType dtype, const Shape& shape, bool on_device) {
  size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  try {
    return on_device ? std::make_shared<Storage>(bytes, Storage::OnDevice{}) : std::make_shared<Storage>(bytes);
  } catch (const std::bad_alloc& error) {
    throw AllocationError(std::string(error.what()) + " for the result of " + output.op_name() + " " +
                          dtype_name(dtype) + " " + shape_to_string(shape) + " created at " +
                          output.provenance.to_string());
  }
}

CodeLaunch begin_code_launch(const NodePtr& output, const std::vector<NodePtr>& inputs, bool on_device) {
  CodeLaunch launch;
  if (output->is_computed()) return launch;  // a sibling output's launch earlier in this plan computed it
  launch.payload = dynamic_cast<const CodePayload*>(output->payload.get());
  if (!launch.payload) throw std::logic_error("internal error: a code kernel's output is not a Code op");
  const CodeOp& op = *launch.payload->op;
  for (size_t index = 0; index < op.output_shapes.size(); ++index) {
    launch.storages.push_back(allocate_result(*output, op.output_dtypes[index], op.output_shapes[index], on_device));
    launch.buffers.push_back(on_device ? launch.storages.back()->device_data() : launch.storages.back()->data());
  }
  for (const NodePtr& input : inputs) {
    if (!input->storage) throw std::logic_error("kernel input " + input->op_name() + " was not computed");
    launch.buffers.push_back(on_device ? input->storage->device_data() : input->storage->data());
  }
  return launch;
}

// A Code op runs once for all its outputs; the first of them to be launched publishes every live one.
void run_code_on_host(const NodePtr& output, const std::vector<NodePtr>& inputs, KernelFunction function,
                      int64_t work_items) {
  CodeLaunch launch = begin_code_launch(output, inputs, /*on_device=*/false);
  if (!launch.payload) return;
  const CodeOp& op = *launch.payload->op;
  std::vector<void*>& buffers = launch.buffers;
  std::vector<double> data = op.data_values;
  data.push_back(0);  // the error slot
  buffers.push_back(data.data());
  if (work_items > 1)  // cpu_parallel: the source runs its share [begin, end) of the items on each thread
    parallel_for(work_items, 1, [&](int64_t begin, int64_t end) { function(buffers.data(), begin, end); });
  else
    function(buffers.data(), 0, 1);
  stats().kernels_launched++;
  const char* missing = nullptr;
  std::memcpy(&missing, &data.back(), sizeof(missing));
  if (missing)
    throw std::runtime_error("the " + op.what + " created at " + op.provenance.to_string() + " read data[\"" +
                             missing + "\"], which is not in its data (given: " + code_data_names(op) + ")");
  publish_code_outputs(*launch.payload, output, launch.storages);
}

std::string code_data_names(const CodeOp& op) {
  std::string names;
  for (const std::string& name : op.data_names) names += (names.empty() ? "" : ", ") + name;
  return names.empty() ? "none" : names;
}

void publish_code_outputs(const CodePayload& payload, const NodePtr& output, const std::vector<StoragePtr>& storages) {
  std::vector<NodePtr> outputs = payload.outputs();
  for (size_t index = 0; index < outputs.size(); ++index) {
    const NodePtr& sibling = outputs[index];
    if (!sibling || sibling->is_computed()) continue;
    publish_storage(*sibling, storages[index]);
    if (sibling != output) release_inputs(*sibling);
  }
  if (!output->is_computed()) publish_storage(*output, storages[payload.output_index]);
}

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

namespace {

// The CPU as a Device: the run's kernels are compiled or loaded before the first one runs, and the oneDNN
// backend hears of the run's library calls for as long as the run lasts.
class CpuDevice : public Device {
 public:
  explicit CpuDevice(const Plan& plan) {
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

  void launch(const PlannedKernel& kernel, const NodePtr& output, const std::vector<NodePtr>& siblings,
              const std::vector<NodePtr>& inputs) override {
    KernelFunction function = kernel.key.empty() ? nullptr : host_kernel_function(kernel, *output);
    run_kernel(kernel, output, siblings, inputs, function);
  }

 private:
  std::unique_ptr<LibraryRunScope> library_run_;

  static void run_kernel(const PlannedKernel& kernel, const NodePtr& output, const std::vector<NodePtr>& siblings,
                         const std::vector<NodePtr>& inputs, KernelFunction function) {
    if (kernel.code) return run_code_on_host(output, inputs, function, kernel.rendered.work_items);
    StoragePtr storage = allocate_result(*output, output->dtype, output->shape, /*on_device=*/false);
    std::vector<void*> buffers{storage->data()};
    std::vector<StoragePtr> sibling_storages;
    for (const NodePtr& sibling : siblings) {
      sibling_storages.push_back(allocate_result(*sibling, sibling->dtype, sibling->shape, /*on_device=*/false));
      buffers.push_back(sibling_storages.back()->data());
    }
    for (const NodePtr& input : inputs) {
      if (!input->storage) throw std::logic_error("kernel input " + input->op_name() + " was not computed");
      buffers.push_back(input->storage->data());
    }
    StoragePtr temporary;
    if (kernel.library) {
      if (function) {  // the library writes a temporary; the epilogue kernel reads it as its last buffer
        temporary = std::make_shared<Storage>(size_t(output->numel()) * sizeof(float));
        buffers[0] = temporary->data();
      }
      try {
        use_thread_count_in_libraries();
        kernel.library->run(buffers.data());
      } catch (const std::exception& error) {
        throw std::runtime_error("while computing " + output->op_name() + " created at " + output->provenance.to_string() +
                                 " with " + kernel.library->describe() + ": " + error.what());
      }
      stats().library_calls++;
      if (!function) {
        publish_storage(*output, std::move(storage));
        return;
      }
      buffers[0] = storage->data();
      buffers.push_back(temporary->data());
    }
    for (size_t index = 0; index < kernel.buffer_offsets.size(); ++index)
      if (kernel.buffer_offsets[index])
        buffers[index] = static_cast<char*>(buffers[index]) +
                         kernel.buffer_offsets[index] * int64_t(dtype_size(kernel.lowered.kernel.buffers[index].dtype));
    int64_t work = kernel.rendered.work_items;
    if (work > 0) {
      parallel_for(work, kernel.rendered.grain,
                   [&](int64_t begin, int64_t end) { function(buffers.data(), begin, end); });
      stats().kernels_launched++;
    }
    publish_storage(*output, std::move(storage));
    for (size_t index = 0; index < siblings.size(); ++index)
      publish_storage(*siblings[index], std::move(sibling_storages[index]));
  }
};

class JitGraphRunner : public GraphRunner {
 public:
  void run(const std::vector<NodePtr>& targets) override {
    if (cuda_execution() != CudaExecution::Off) return run_on_cuda(targets);
    auto planning_start = std::chrono::steady_clock::now();
    GraphSignature signature = graph_signature(targets);
    std::shared_ptr<const Plan> plan = PlanCache::instance().find(signature.text);
    if (!plan) plan = PlanCache::instance().insert(signature.text, make_plan(signature, plan_kernels(targets)));
    stats().planning_nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - planning_start).count();
    CpuDevice device(*plan);
    run_plan(*plan, signature.nodes, device);
  }
};

}  // namespace

void set_kernel_profiling(bool enabled) { profiling_ = enabled; }
bool kernel_profiling() { return profiling_; }
void check_kernel_output(const PlannedKernel& kernel, const Node& output, const std::vector<NodePtr>& inputs) {
  check_output(kernel, output, inputs);
}
void record_kernel_profile(const PlannedKernel& kernel, const Node& output, double seconds) {
  record_profile(kernel, output, seconds);
}
void set_check_non_finite(bool enabled) { check_non_finite_ = enabled; }
bool check_non_finite() { return check_non_finite_; }

std::vector<KernelProfile> kernel_profile() {
  std::vector<KernelProfile> entries;
  {
    std::lock_guard<std::mutex> lock(profile_mutex_);
    for (const auto& [identity, entry] : profile_) entries.push_back(entry);
  }
  std::sort(entries.begin(), entries.end(), [](const KernelProfile& a, const KernelProfile& b) { return a.seconds > b.seconds; });
  return entries;
}

void reset_kernel_profile() {
  std::lock_guard<std::mutex> lock(profile_mutex_);
  profile_.clear();
}

void install_graph_executor() {
  static JitGraphRunner runner;
  set_graph_runner(&runner);
}

}  // namespace metajit
