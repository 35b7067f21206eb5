// Pass 2, cut deep chains: no kernel inlines a chain of more than kMaximumFusedDepth ops. Where a chain reaches
// it, the value is stored and the rest of the chain reads it from memory. Lowering and rendering walk a kernel's
// expression recursively, so a lazily built chain of 20,000 additions fused whole overflowed the stack; kernels
// this long gain nothing from more fusion. Runs once, before the fixpoint, in creation order (inputs first).

#include <algorithm>

#include "jit/plan/planning_state.h"
#include "meta_ops/elementwise.h"

namespace metajit {
namespace {

// The depth starts again after a contraction (a sum of a product of two broadcast operands: a matrix product,
// a convolution): counted through them, an unrolled LSTM's steps were cut wherever the count reached the limit,
// a different point of a step each time, and each cut made kernels no other step had (a 100-step LSTMCell's
// gradient: 59 distinct kernels to compile; 20 without those cuts). A contraction goes to the library, or is a
// loop (of its own, or inlined into its reader) whose operands, read at the summed index, are stored first, so no
// kernel inlines a chain through it. Other reductions still count: inlined as per-row passes of per-row passes
// they nest as deep as the chain.
Node* below_views(Node* node) {
  while ((node->kind == NodeKind::View || node->kind == NodeKind::Reshape) && !node->inputs.empty())
    node = node->inputs[0].get();
  return node;
}

bool starts_a_chain_again(const Node& node) {
  if (node.kind != NodeKind::Reduce || node.inputs[0]->kind != NodeKind::Binary) return false;
  const Node& product = *node.inputs[0];
  if (BinaryOp(product.op_code) != BinaryOp::Multiply || product.inputs.size() != 2) return false;
  for (const NodePtr& operand : product.inputs)
    if (below_views(operand.get())->numel() >= product.numel()) return false;
  return node.numel() < product.numel();
}

}  // namespace

void cut_deep_chains(PlanningState& state) {
  if (state.pending_nodes.size() < size_t(kMaximumFusedDepth)) return;
  std::vector<Node*> order;
  order.reserve(state.pending_nodes.size());
  for (const auto& entry : state.pending_nodes) order.push_back(entry.first);
  std::sort(order.begin(), order.end(), [](const Node* a, const Node* b) { return a->id < b->id; });
  std::unordered_map<Node*, int> depth;  // ops along the longest chain ending at a node
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
    } else if (starts_a_chain_again(*node)) {
      longest = 0;
    }
    depth.emplace(node, longest);
  }
}

}  // namespace metajit
