// Pass 1, collect pending: the targets become the first roots, and one walk finds every pending node behind them
// with the number of pending nodes reading each. Later passes look nodes up here instead of walking the graph
// again: a walk per lookup made planning quadratic.
#include "jit/plan/planning_state.h"

namespace metajit {

void collect_pending(PlanningState& state) {
  for (const NodePtr& target : state.targets) state.add_root(target);
  std::vector<NodePtr> stack(state.targets.begin(), state.targets.end());
  while (!stack.empty()) {
    NodePtr node = std::move(stack.back());
    stack.pop_back();
    if (node->is_computed() || !state.pending_nodes.emplace(node.get(), node).second) continue;
    for (const NodePtr& input : node->inputs) {
      if (input->is_computed()) continue;
      ++state.consumers[input.get()];
      stack.push_back(input);
    }
  }
}

}  // namespace metajit
