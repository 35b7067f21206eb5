// Pass 2, cut deep chains: no kernel inlines a chain of more than kMaximumFusedDepth ops. Where a chain reaches
// it, the value is stored and the rest of the chain reads it from memory. Lowering and rendering walk a kernel's
// expression recursively, so a lazily built chain of 20,000 additions fused whole overflowed the stack; kernels
// this long gain nothing from more fusion. Runs once, before the fixpoint, in creation order (inputs first).
#include <algorithm>

#include "jit/plan/planning_state.h"

namespace metajit {

void cut_deep_chains(PlanningState& state) {
  if (state.pending_nodes.size() < size_t(kMaximumFusedDepth)) return;
  std::vector<Node*> order;
  order.reserve(state.pending_nodes.size());
  for (const auto& entry : state.pending_nodes) order.push_back(entry.first);
  std::sort(order.begin(), order.end(), [](const Node* a, const Node* b) { return a->id < b->id; });
  std::unordered_map<Node*, int> depth;  // ops inlined along the longest chain ending at a node
  depth.reserve(order.size());
  for (Node* node : order) {
    int longest = 1;
    for (const NodePtr& input : node->inputs) {
      auto found = depth.find(input.get());
      if (found != depth.end() && !state.materialized.count(input.get())) longest = std::max(longest, found->second + 1);
    }
    if (longest >= kMaximumFusedDepth) {
      state.add_root(state.pending_nodes.at(node));
      longest = 0;  // its readers read a buffer
    }
    depth.emplace(node, longest);
  }
}

}  // namespace metajit
