#include "jit/plan/planning_state.h"

#include <stdexcept>

namespace metajit {

PlanningState::PlanningState(const std::vector<NodePtr>& targets, ContractionBackend backend)
    : targets(targets), backend(backend), use_library(backend && library_lowering_enabled()) {}

void PlanningState::add_root(const NodePtr& node) {
  if (node->is_computed() || !materialized.insert(node.get()).second) return;
  roots.push_back(node);
}

NodePtr PlanningState::find_node(Node* wanted) const {
  auto found = pending_nodes.find(wanted);
  if (found == pending_nodes.end()) throw std::logic_error("requested node not found in graph");
  return found->second;
}

}  // namespace metajit
