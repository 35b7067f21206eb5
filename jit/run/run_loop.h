// One run loop for every device: a plan's kernels in launch order against the nodes of the graph it was made for,
// with the METAJIT_CHECK_NAN checks, kernel profiling, interrupts, and each intermediate buffer handed back after
// its last reader. It also launches each kernel the same way everywhere: result buffers, a library call and the
// temporary its epilogue reads, launch offsets, a Code op's data and error slot, publishing the results.
// What differs between the CPU, the GPU and the CUDA emulator is a Device, a handful of low-level operations;
// the loop must not know which device runs it, and a Device must not know what a plan or a graph is beyond the
// one kernel it is asked to launch.
#pragma once
#include <cstddef>
#include <vector>

#include "core/node.h"
#include "jit/plan/plan.h"
#include "jit/run/run_values.h"

namespace metajit {

// Where a run's kernels execute. A Device object lives for one run: it may prepare what the plan needs when it
// is made, and lets go of it when it is destroyed, also when a kernel throws.
class Device {
 public:
  virtual ~Device() = default;
  // Memory on this device; throws std::bad_alloc when there is none (the loop names the value it was for).
  virtual StoragePtr allocate(size_t bytes) = 0;
  // The address this device's code reads and writes `storage` at (a value that lives only on the other side is
  // copied over first).
  virtual void* buffer(Storage& storage) = 0;
  virtual void copy_to_device(void* device, const void* host, size_t bytes) = 0;
  virtual void copy_to_host(void* host, const void* device, size_t bytes) = 0;
  // Runs the kernel's own code (generated, or a Code op's) over `buffers`, its parameters in order; errors name
  // `output`. Returns whether anything was launched (a kernel over no elements launches nothing).
  virtual bool launch_kernel(const PlannedKernel& kernel, const Node& output, const std::vector<void*>& buffers) = 0;
  // Runs a vendor-library call (oneDNN on the CPU, cuBLAS or cuDNN on the GPU) over `buffers`.
  virtual void run_library_call(const LibraryCall& call, void* const* buffers) = 0;
  // Waits until the queued kernels have finished; profiling times each kernel between two of these.
  virtual void synchronize() {}
  // Where the kernels a plan puts on the host run (PlannedKernel::on_host): the CPU.
  virtual Device& host() { return *this; }
};

// Runs `plan` against `nodes` (the nodes of the signature it was cached under) on `device`, publishing each value
// on its node.
void run_plan(const Plan& plan, const std::vector<NodePtr>& nodes, Device& device);
// The same with the values going to `values`; buffers go early and edges are cut only when it publishes on nodes.
// `releasable`, when given, says per position which buffers may go after their last reader, where a run of a
// signature's own nodes works it out from their reference counts (a traced replay runs on fresh nodes).
void run_plan(const Plan& plan, const std::vector<NodePtr>& nodes, Device& device, RunValues& values,
              const std::vector<uint8_t>* releasable = nullptr);

}  // namespace metajit
