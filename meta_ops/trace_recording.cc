#include "meta_ops/trace_recording.h"

#include "core/executor.h"
#include "meta_ops/var.h"

namespace metajit {
namespace {
thread_local TraceRecording* active = nullptr;
}  // namespace

TraceRecording* active_trace_recording() { return active; }

TraceRecording* set_active_trace_recording(TraceRecording* recording) {
  TraceRecording* previous = active;
  active = recording;
  return previous;
}

void note_trace_read(Var& var, const NodePtr& node) {
  if (!node) return;
  if (!node->is_computed()) {
    if (node->id >= active->first_node_id) return;  // made inside: part of the traced graph
    // A lazy value from before the call (a buffer made by mj.zeros, an update not yet computed): the trace
    // starts from it computed, so a replay reads the Var's value then instead of recomputing this one.
    TraceRecording* recording = set_active_trace_recording(nullptr);
    const char* refusal = refuse_syncs(nullptr);
    try {
      sync({node});
    } catch (...) {
      refuse_syncs(refusal);
      set_active_trace_recording(recording);
      throw;
    }
    refuse_syncs(refusal);
    set_active_trace_recording(recording);
  }
  auto [entry, added] = active->read_through.try_emplace(node.get());
  if (added) active->values_read.push_back(node);
  std::vector<std::weak_ptr<Var>>& readers = entry->second;
  for (const std::weak_ptr<Var>& reader : readers)
    if (!reader.owner_before(var.weak_from_this()) && !var.weak_from_this().owner_before(reader)) return;
  readers.push_back(var.weak_from_this());
}

void note_trace_write(Var& var) { active->written.push_back(var.weak_from_this()); }

void note_trace_random(const NodePtr& node, RandomDistribution distribution) {
  active->random.emplace(node.get(), distribution);
  active->values_read.push_back(node);
}

void note_trace_gradient_read(const std::shared_ptr<Node::GradientSlot>& slot) {
  if (!slot || !slot->grad || !slot->grad->is_computed()) return;
  if (active->gradients_read.emplace(slot->grad.get(), slot).second) active->values_read.push_back(slot->grad);
}

void note_trace_gradient_write(const std::shared_ptr<Node::GradientSlot>& slot) {
  active->gradients_written.push_back(slot);
}

}  // namespace metajit
