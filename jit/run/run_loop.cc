#include "jit/run/run_loop.h"

#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/executor.h"
#include "core/flags.h"
#include "core/host_operation.h"
#include "core/stats.h"
#include "jit/plan/buffer_lifetimes.h"
#include "jit/run/kernel_profile.h"
#include "jit/run/non_finite_check.h"
#include "meta_ops/code.h"

namespace metajit {
namespace {

// A kernel's result storage on `device`; a failed allocation names the node and the user's line.
StoragePtr allocate_result(Device& device, const Node& output, DType dtype, const Shape& shape) {
  try {
    return device.allocate(size_t(shape_numel(shape)) * dtype_size(dtype));
  } catch (const std::bad_alloc& error) {
    throw AllocationError(std::string(error.what()) + " for the result of " + output.op_name() + " " +
                          dtype_name(dtype) + " " + shape_to_string(shape) + " created at " +
                          output.provenance.to_string());
  }
}

// An input's address on `device`; bringing it there may need memory (a value on the other side), and a failure
// names the value and the op that reads it.
void* input_buffer(Device& device, const RunValues& values, const Node& input, const Node& reader) {
  const StoragePtr& storage = values.value(input);
  if (!storage) throw std::logic_error("kernel input " + input.op_name() + " was not computed");
  try {
    return device.buffer(*storage);
  } catch (const std::bad_alloc& error) {
    throw AllocationError(std::string(error.what()) + ", to bring " + input.op_name() + " " + dtype_name(input.dtype) +
                          " " + shape_to_string(input.shape) + " to the device for " + reader.op_name() + " " +
                          shape_to_string(reader.shape) + " created at " + reader.provenance.to_string());
  }
}

std::string code_data_names(const CodeOp& op) {
  std::string names;
  for (const std::string& name : op.data_names) names += (names.empty() ? "" : ", ") + name;
  return names.empty() ? "none" : names;
}

// A Code op runs once for all its outputs; the first of them to be launched publishes every live one. Its data
// values follow its buffers, with an error slot after them that the kernel sets when it reads an unknown name:
// its C++ source leaves the name's address there, its CUDA source (device code holds no host strings) a 1.
void launch_code(Device& device, const PlannedKernel& kernel, const NodePtr& output, const std::vector<NodePtr>& inputs,
                 RunValues& values) {
  if (values.computed(*output)) return;  // a sibling output's launch earlier in this plan computed it
  auto* payload = dynamic_cast<const CodePayload*>(output->payload.get());
  if (!payload) throw std::logic_error("internal error: a code kernel's output is not a Code op");
  const CodeOp& op = *payload->op;
  std::vector<StoragePtr> storages;
  std::vector<void*> buffers;
  for (size_t index = 0; index < op.output_shapes.size(); ++index) {
    storages.push_back(allocate_result(device, *output, op.output_dtypes[index], op.output_shapes[index]));
    buffers.push_back(device.buffer(*storages.back()));
  }
  for (const NodePtr& input : inputs) buffers.push_back(input_buffer(device, values, *input, *output));
  std::vector<double> data = op.data_values;
  data.push_back(0);  // the error slot
  StoragePtr data_storage = device.allocate(data.size() * sizeof(double));
  void* data_buffer = device.buffer(*data_storage);
  device.copy_to_device(data_buffer, data.data(), data.size() * sizeof(double));
  buffers.push_back(data_buffer);
  if (device.launch_kernel(kernel, *output, buffers)) stats().kernels_launched++;
  uint64_t error = 0;
  device.copy_to_host(&error, static_cast<double*>(data_buffer) + op.data_values.size(), sizeof(error));
  if (error != 0) {
    bool ran_cuda_source = !kernel.on_host && !kernel.cuda.source.empty();
    if (ran_cuda_source)
      throw std::runtime_error("the " + op.what + " created at " + op.provenance.to_string() +
                               " read a data[\"name\"] that is not in its data (given: " + code_data_names(op) + ")");
    const char* missing = nullptr;
    std::memcpy(&missing, &error, sizeof(missing));
    throw std::runtime_error("the " + op.what + " created at " + op.provenance.to_string() + " read data[\"" + missing +
                             "\"], which is not in its data (given: " + code_data_names(op) + ")");
  }
  std::vector<NodePtr> outputs = payload->outputs();
  for (size_t index = 0; index < outputs.size(); ++index) {
    const NodePtr& sibling = outputs[index];
    if (!sibling || values.computed(*sibling)) continue;
    values.store(*sibling, storages[index]);
    if (sibling != output) values.cut_inputs(*sibling);
  }
  if (!values.computed(*output)) values.store(*output, storages[payload->output_index]);
}

// Host work reads its inputs' host buffers and writes its own; its errors (a collective called differently on
// another rank) keep their type, so Python sees the error the operation raised. Work it started and has not
// finished comes back in `work`; the output is published at once, for the loop to wait on before a reader.
void launch_host_operation(Device& host, const NodePtr& output, const std::vector<NodePtr>& inputs, RunValues& values,
                           std::unique_ptr<HostWork>* work) {
  StoragePtr storage = allocate_result(host, *output, output->dtype, output->shape);
  std::vector<const void*> buffers;
  for (const NodePtr& input : inputs) buffers.push_back(input_buffer(host, values, *input, *output));
  *work = host_operation_of(*output).start(host.buffer(*storage), buffers);
  values.store(*output, std::move(storage));
}

// A kernel's buffers: its output, the further outputs of a kernel with several (siblings), then its inputs.
void launch(Device& device, const PlannedKernel& kernel, const NodePtr& output, const std::vector<NodePtr>& siblings,
            const std::vector<NodePtr>& inputs, RunValues& values, std::unique_ptr<HostWork>* work) {
  if (kernel.code) return launch_code(device, kernel, output, inputs, values);
  if (kernel.host_operation) return launch_host_operation(device, output, inputs, values, work);
  StoragePtr storage = allocate_result(device, *output, output->dtype, output->shape);
  std::vector<void*> buffers{device.buffer(*storage)};
  std::vector<StoragePtr> sibling_storages;
  for (const NodePtr& sibling : siblings) {
    sibling_storages.push_back(allocate_result(device, *sibling, sibling->dtype, sibling->shape));
    buffers.push_back(device.buffer(*sibling_storages.back()));
  }
  for (const NodePtr& input : inputs) buffers.push_back(input_buffer(device, values, *input, *output));
  StoragePtr temporary;
  if (kernel.library) {
    if (kernel.epilogue) {  // the library writes a temporary; the epilogue kernel reads it as its last buffer
      temporary = device.allocate(size_t(output->numel()) * sizeof(float));
      buffers[0] = device.buffer(*temporary);
    }
    try {
      device.run_library_call(*kernel.library, buffers.data());
    } catch (const std::exception& error) {
      throw std::runtime_error("while computing " + output->op_name() + " created at " +
                               output->provenance.to_string() + " with " + kernel.library->describe() + ": " +
                               error.what());
    }
    stats().library_calls++;
    buffers[0] = device.buffer(*storage);
    if (temporary) buffers.push_back(device.buffer(*temporary));
  }
  if (!kernel.library || kernel.epilogue) {
    for (size_t index = 0; index < kernel.buffer_offsets.size(); ++index)
      if (kernel.buffer_offsets[index])
        buffers[index] = static_cast<char*>(buffers[index]) +
                         kernel.buffer_offsets[index] * int64_t(dtype_size(kernel.lowered.kernel.buffers[index].dtype));
    if (device.launch_kernel(kernel, *output, buffers)) stats().kernels_launched++;
  }
  values.store(*output, std::move(storage));
  for (size_t index = 0; index < siblings.size(); ++index)
    values.store(*siblings[index], std::move(sibling_storages[index]));
}

// Host work in flight during a run (a collective moving while kernels run), in the order it started.
class PendingHostWork {
 public:
  struct Entry {
    const Node* output;
    std::unique_ptr<HostWork> work;
    size_t kernel;  // whose buffers it still reads: released when it finishes
  };
  explicit PendingHostWork(std::function<void(size_t)> finished) : finished_(std::move(finished)) {}
  // On an error the work still in flight is waited for: its buffers must not go back to the allocator under it.
  ~PendingHostWork() {
    for (Entry& entry : entries_) {
      try {
        entry.work->wait();
      } catch (...) {
      }
    }
  }
  void add(const Node* output, std::unique_ptr<HostWork> work, size_t kernel) {
    entries_.push_back({output, std::move(work), kernel});
  }
  bool empty() const { return entries_.empty(); }
  // Waits for the work whose results a kernel is about to read.
  void wait_for(const std::vector<NodePtr>& inputs) {
    for (size_t index = 0; index < entries_.size();) {
      bool read = false;
      for (const NodePtr& input : inputs) read = read || input.get() == entries_[index].output;
      if (read) {
        entries_[index].work->wait();
        finish(index);
      } else {
        ++index;
      }
    }
  }
  // Lets the work progress between kernels; what has finished is let go.
  void test() {
    for (size_t index = 0; index < entries_.size();) {
      if (entries_[index].work->test())
        finish(index);
      else
        ++index;
    }
  }
  void wait_all() {
    while (!entries_.empty()) {
      entries_.front().work->wait();
      finish(0);
    }
  }

 private:
  void finish(size_t index) {
    size_t kernel = entries_[index].kernel;
    entries_.erase(entries_.begin() + std::ptrdiff_t(index));
    finished_(kernel);
  }
  std::vector<Entry> entries_;
  std::function<void(size_t)> finished_;
};

}  // namespace

void run_plan(const Plan& plan, const std::vector<NodePtr>& nodes, Device& device) {
  RunValues values(RunValues::Where::OnNodes);
  run_plan(plan, nodes, device, values);
}

void run_plan(const Plan& plan, const std::vector<NodePtr>& nodes, Device& device, RunValues& values,
              const std::vector<uint8_t>* given_releasable) {
  bool check_values = check_non_finite();
  bool profiling = kernel_profiling();
  const BufferLifetimes& lifetimes = plan.lifetimes;
  std::vector<uint8_t> releasable;
  if (values.on_nodes())
    releasable = given_releasable ? *given_releasable : releasable_buffers(lifetimes, nodes, /*computed_inputs=*/true);
  auto release_after = [&](size_t index) {
    if (values.on_nodes()) stats().buffers_released_early += release_after_kernel(lifetimes, releasable, nodes, index);
  };
  PendingHostWork pending(release_after);
  bool overlap = flag_boolean(Flag::OverlapCollectives);
  for (size_t index = 0; index < plan.kernels.size(); ++index) {
    check_interrupt();
    begin_device_launch();  // the buffers this launch uses stay on the device while it gathers them
    const PlannedKernel& kernel = plan.kernels[index];
    Device& target = kernel.on_host ? device.host() : device;
    const NodePtr& output = nodes[plan.outputs[index]];
    std::vector<NodePtr> inputs, siblings;
    for (int position : plan.inputs[index]) inputs.push_back(nodes[position]);
    for (int position : plan.siblings[index]) siblings.push_back(nodes[position]);
    if (!pending.empty()) pending.wait_for(inputs);
    std::unique_ptr<HostWork> work;
    if (profiling) {
      device.synchronize();
      double start = profile_clock();
      launch(target, kernel, output, siblings, inputs, values, &work);
      if (work) work->wait();  // a profile times each entry whole
      work.reset();
      device.synchronize();
      record_kernel_profile(kernel, *output, start, profile_clock() - start);
    } else {
      launch(target, kernel, output, siblings, inputs, values, &work);
      if (work && (check_values || !overlap)) {  // the check reads the result
        work->wait();
        work.reset();
      }
    }
    if (check_values) {
      check_kernel_output(kernel, *output, inputs, values);
      for (const NodePtr& sibling : siblings) check_kernel_output(kernel, *sibling, inputs, values);
    }
    inputs.clear();  // their copies of the node pointers must not count as holders below
    siblings.clear();
    if (work) {
      pending.add(output.get(), std::move(work), index);
    } else {
      release_after(index);
      if (!pending.empty()) pending.test();
    }
  }
  pending.wait_all();
  if (values.on_nodes()) release_computed_inputs(plan, nodes);
}

}  // namespace metajit
