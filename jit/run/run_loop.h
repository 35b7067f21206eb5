// One run loop for every device: a plan's kernels in launch order against the nodes of the graph it was made for,
// with the METAJIT_CHECK_NAN checks, kernel profiling, interrupts, and each intermediate buffer handed back after
// its last reader. What differs between the CPU, the GPU and the CUDA emulator is a Device; the loop itself must
// not know which device runs it.
#pragma once
#include <vector>

#include "core/node.h"
#include "jit/plan/plan.h"

namespace metajit {

// Where a run's kernels execute. A Device object lives for one run: it prepares what the plan needs when it is
// made, and lets go of it when it is destroyed, also when a kernel throws.
class Device {
 public:
  virtual ~Device() = default;
  // Runs one kernel of the plan: allocates its outputs, runs its library call, generated kernel or Code op, and
  // publishes the results on the nodes.
  virtual void launch(const PlannedKernel& kernel, const NodePtr& output, const std::vector<NodePtr>& siblings,
                      const std::vector<NodePtr>& inputs) = 0;
  // Waits until the queued kernels have finished; profiling times each kernel between two of these.
  virtual void synchronize() {}
};

// Runs `plan` against `nodes` (the nodes of the signature it was cached under) on `device`.
void run_plan(const Plan& plan, const std::vector<NodePtr>& nodes, Device& device);

}  // namespace metajit
