// When a plan run can hand a buffer back to the allocator: right after the last kernel that reads it, instead of
// at the end of the run (an intermediate, or an input nothing but the plan's graph holds any more). A training step's
// gradient buffers then reuse each other's memory (and each other's cache lines) instead of all being alive together.
//
// A buffer may go early only if nothing outside the plan's graph holds its node (no Var, no leaf's .grad, no
// pending node of another graph) and the graph itself lets go of it when the run ends: every node that reads it
// either has its inputs cut after being computed, or dies with the run. The node's reference count tells the
// first, checked at the start of each run; the plan's structure (cached with it) tells the second.
#pragma once
#include <cstdint>
#include <vector>

#include "core/node.h"

namespace metajit {

struct GraphSignature;
struct Plan;

// The structure, per plan (positions are indexes into the signature's node list).
struct BufferLifetimes {
  std::vector<std::vector<int>> readers;       // per position: the pending nodes reading it, once per edge
  std::vector<uint8_t> is_target;
  std::vector<uint8_t> is_kernel_output;       // computed by one of the plan's kernels (an output or a sibling)
  // Per kernel: the kernel outputs and computed inputs (not targets) no later kernel reads.
  std::vector<std::vector<int>> last_read_by;
};

// Built when the plan is cached, from the signature's nodes as they are before the run.
BufferLifetimes buffer_lifetimes(const GraphSignature& signature, const Plan& plan);

// Per position, at the start of a run: true where the node's buffer may go after its last reader. Computed inputs
// only with `computed_inputs`: a run that mj.trace records keeps them, since its replays read them again.
std::vector<uint8_t> releasable_buffers(const BufferLifetimes& lifetimes, const std::vector<NodePtr>& nodes,
                                        bool computed_inputs);

// Takes a computed node's buffer away (under the executor's edge lock) if its holders are still just the graph
// edges the plan knows of; tells the library layer the memory is gone (it may have kept copies keyed by its
// address). Returns whether the buffer went.
bool release_buffer(const NodePtr& node, size_t graph_readers);

// After kernel `kernel` of a run: releases the buffers it was the last reader of, where `releasable` allows;
// returns how many went. Both runners (CPU and CUDA) call it after each kernel.
int release_after_kernel(const BufferLifetimes& lifetimes, const std::vector<uint8_t>& releasable,
                         const std::vector<NodePtr>& nodes, size_t kernel);
// At the end of a run: cuts the input edges of every value the plan computed (outputs and siblings).
void release_computed_inputs(const Plan& plan, const std::vector<NodePtr>& nodes);

}  // namespace metajit
