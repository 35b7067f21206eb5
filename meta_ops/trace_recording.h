// What a function touches while mj.trace records it: the Vars it reads values from, the Vars it writes, the
// Vars it makes, and the random values it draws. trace/traced_function.h turns this into a plan that replays
// without Python. Only the recording thread is watched; outside a recording the hooks cost one thread-local
// test. This file records; it must not plan, run or decide what a replay does.
#pragma once
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/node.h"
#include "meta_ops/random_values.h"

namespace metajit {

class Var;

struct TraceRecording {
  uint64_t first_node_id = 0;  // nodes made during the recording have this id or later
  // Computed values read through a Var, with the Vars they were read through (a temporary one may be gone).
  std::unordered_map<const Node*, std::vector<std::weak_ptr<Var>>> read_through;
  std::vector<std::weak_ptr<Var>> written;  // Vars an in-place op rebound, in order (repeats allowed)
  std::unordered_set<const Var*> made;      // Vars made during the recording and not destroyed yet
  std::unordered_map<const Node*, RandomDistribution> random;  // random draws made during the recording
  // Leaves' gradients read as they were before (an accumulating backward), and the slots the function set.
  std::unordered_map<const Node*, std::shared_ptr<Node::GradientSlot>> gradients_read;
  std::vector<std::shared_ptr<Node::GradientSlot>> gradients_written;
  // Every node the maps above name, kept alive while the recording lasts: a freed node's address could be
  // reused by another node and taken for it.
  std::vector<NodePtr> values_read;
};

// The recording of the calling thread, or null.
TraceRecording* active_trace_recording();
// Starts (a recording) or stops (null) watching the calling thread; returns the previous recording.
TraceRecording* set_active_trace_recording(TraceRecording* recording);

// The hooks: Var (meta_ops/var.cc) and random_values call them when a recording is active.
void note_trace_read(Var& var, const NodePtr& node);
void note_trace_write(Var& var);
void note_trace_random(const NodePtr& node, RandomDistribution distribution);
void note_trace_gradient_read(const std::shared_ptr<Node::GradientSlot>& slot);
void note_trace_gradient_write(const std::shared_ptr<Node::GradientSlot>& slot);

}  // namespace metajit
