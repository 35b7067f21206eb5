#include "jit/run/run_loop.h"

#include <chrono>

#include "core/executor.h"
#include "core/stats.h"
#include "jit/plan/buffer_lifetimes.h"
#include "jit/run/graph_executor.h"

namespace metajit {

void run_plan(const Plan& plan, const std::vector<NodePtr>& nodes, Device& device) {
  bool check_values = check_non_finite();
  bool profiling = kernel_profiling();
  const BufferLifetimes& lifetimes = plan.lifetimes;
  std::vector<uint8_t> releasable = releasable_buffers(lifetimes, nodes);
  for (size_t index = 0; index < plan.kernels.size(); ++index) {
    check_interrupt();
    const PlannedKernel& kernel = plan.kernels[index];
    const NodePtr& output = nodes[plan.outputs[index]];
    std::vector<NodePtr> inputs, siblings;
    for (int position : plan.inputs[index]) inputs.push_back(nodes[position]);
    for (int position : plan.siblings[index]) siblings.push_back(nodes[position]);
    if (profiling) {
      device.synchronize();
      auto start = std::chrono::steady_clock::now();
      device.launch(kernel, output, siblings, inputs);
      device.synchronize();
      record_kernel_profile(kernel, *output, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    } else {
      device.launch(kernel, output, siblings, inputs);
    }
    if (check_values) {
      check_kernel_output(kernel, *output, inputs);
      for (const NodePtr& sibling : siblings) check_kernel_output(kernel, *sibling, inputs);
    }
    inputs.clear();  // their copies of the node pointers must not count as holders below
    siblings.clear();
    stats().buffers_released_early += release_after_kernel(lifetimes, releasable, nodes, index);
  }
  release_computed_inputs(plan, nodes);
}

}  // namespace metajit
