// Pass 4, fold consumers into library calls: a library call's result read by one elementwise value that is
// stored too (a Linear layer's x @ W^T, then + bias, which many kernels read: an RNN's input projection sliced
// per step, attention's q, k and v taken from one projection). The fixpoint stores the product first, for a
// reader that found it inside its kernel, and the sum later, for its many readers: two passes where the call
// could add the bias itself. When the reader's own kernel, with the product inlined again, folds into the call,
// it takes the product's place. Runs only with a library backend.
#include <algorithm>

#include "jit/plan/planning_state.h"

namespace metajit {
namespace {

// Whether `reader`'s group, lowered with `product` inlined, folds into a call the backend takes; sets `plan`.
bool folds_into_call(const PlanningState& state, Node* reader, RootPlan* plan) {
  plan->result = lower_group(state.find_node(reader), state.materialized, &state.consumers);
  if (!plan->result.materialize_requests.empty()) return false;
  plan->match = match_contraction(plan->result.lowered);
  if (!plan->match.contraction || !plan->match.materialize.empty()) return false;
  bool folds = false;
  for (const ContractionMatch::Folded& fold : plan->match.folds) folds = folds || state.backend(fold.contraction);
  return folds;
}

}  // namespace

void fold_consumers_into_calls(PlanningState& state) {
  std::unordered_set<Node*> target_nodes;
  for (const NodePtr& target : state.targets) target_nodes.insert(target.get());
  std::unordered_map<Node*, Node*> only_reader;  // pending node -> its one pending reader
  for (const auto& [node, pointer] : state.pending_nodes)
    for (const NodePtr& input : node->inputs)
      if (state.consumers.count(input.get()) && state.consumers.at(input.get()) == 1) only_reader[input.get()] = node;
  std::unordered_set<Node*> folded;
  for (const NodePtr& root : state.roots) {
    Node* product = root.get();
    auto product_plan = state.plans.find(product);
    if (product_plan == state.plans.end() || !product_plan->second.match.contraction ||
        product_plan->second.match.epilogue || target_nodes.count(product) || !only_reader.count(product))
      continue;
    Node* reader = only_reader.at(product);
    if (!state.materialized.count(reader) || !state.plans.count(reader) || folded.count(reader)) continue;
    state.materialized.erase(product);
    RootPlan plan;
    if (!folds_into_call(state, reader, &plan)) {
      state.materialized.insert(product);
      continue;
    }
    state.plans[reader] = std::move(plan);
    state.plans.erase(product);
    // The call is the reader's now, and with it what was stored for the product's operands.
    auto stores = state.operand_stores.find(product);
    if (stores != state.operand_stores.end()) {
      std::vector<std::string>& reader_stores = state.operand_stores[reader];
      reader_stores.insert(reader_stores.end(), stores->second.begin(), stores->second.end());
      state.operand_stores.erase(stores);
    }
    folded.insert(product);
  }
  state.roots.erase(std::remove_if(state.roots.begin(), state.roots.end(),
                                   [&](const NodePtr& root) { return folded.count(root.get()); }),
                    state.roots.end());
}

}  // namespace metajit
