// A plan as a value: the kernels computing some pending values, in launch order, with the nodes they read and
// write given as positions in the graph signature's node list, so a plan holds no graph alive and one plan
// serves every graph with the same signature. The planner (jit/plan/planner.h) makes one; the run loop
// (jit/run/run_loop.h) runs it against a signature's nodes on a Device (CPU, CUDA stream or CUDA emulator).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "jit/codegen/cpp/cpp_renderer.h"
#include "jit/codegen/cuda/cuda_renderer.h"
#include "jit/ir/lowering.h"
#include "jit/plan/buffer_lifetimes.h"
#include "jit/plan/contraction_matching.h"
#include "jit/plan/graph_signature.h"

namespace metajit {

struct PlannedKernel {
  LoweredKernel lowered;
  RenderedKernel rendered;  // empty when a library call does all the work
  std::string key;          // of `rendered`
  // Per buffer of `rendered`, the elements its launch adds to the buffer's start (jit/ir/launch_offsets.h); empty
  // when none. `lowered.kernel`, which the CUDA renderer reads, still has them in its index expressions.
  std::vector<int64_t> buffer_offsets;
  // A vendor-library call computing the kernel's contraction. With `rendered` set it writes a temporary that
  // the rendered epilogue reads as its last input buffer; otherwise it writes the output itself.
  std::shared_ptr<const LibraryCall> library;
  // With `library`: the contraction it was made for, as plain data (an exported plan rebuilds the call from it).
  std::shared_ptr<const Contraction> library_contraction;
  bool epilogue = false;    // with `library`: the lowered kernel is an epilogue reading the call's temporary
  std::string contraction;  // the matched contraction (Contraction::describe), also when no library took it
  // With `library`: the operands the planner stored first so that the call can read them, and why
  // (describe_operand_store); mj.inspect shows them.
  std::vector<std::string> stored_operands;
  bool code = false;        // a Code op: `rendered` is the user's kernel, launched once for all its outputs
  bool on_host = false;     // in plans for the GPU: a Code op without cuda_src, run on the CPU from `rendered`
  bool host_operation = false;  // work on host buffers (core/host_operation.h), run from the output node's payload
  RenderedCudaKernel cuda;  // in plans for the GPU (jit/run/cuda_graph_runner.h), instead of `rendered`
  std::string cuda_key;     // of `cuda`, for the CUDA binary cache ("" under the emulator)
};

struct Plan {
  std::vector<PlannedKernel> kernels;          // lowered.output / siblings / inputs / origins cleared
  std::vector<int> outputs;                    // per kernel: position of its output node
  std::vector<std::vector<int>> siblings;      // per kernel: positions of its further outputs (usually none)
  std::vector<std::vector<int>> inputs;        // per kernel: positions of its input nodes
  BufferLifetimes lifetimes;                   // which buffers may go before the run ends, and when
};

// The plan of `kernels` (as the planner made them for the graph behind `signature`): their nodes become
// positions in the signature, and the buffer lifetimes are worked out. Counts the signature's pending nodes in
// mj.stats()["planned_nodes"] and the plan in mj.stats()["plans_made"].
std::shared_ptr<const Plan> make_plan(const GraphSignature& signature, std::vector<PlannedKernel> kernels);

}  // namespace metajit
