// Pass 3, lower to a fixpoint: lower every root's group, and whenever a group asks for one of its producers to
// be stored (a reduction needed at another index, a scatter, a node recomputed too often, an operand a library
// call must read from memory), add all such producers found in one round and lower again. When nothing more is
// asked for, values whose recomputation in every reader costs more than storing them are added the same way
// (jit/plan/recompute_policy.h). Node ids follow creation order, so roots sorted by id are a valid launch order.
#include <algorithm>
#include <stdexcept>

#include "jit/plan/planning_state.h"
#include "jit/plan/recompute_policy.h"

namespace metajit {
namespace {

// The sums inlined into a kernel (not its root) that a library would run as contractions of their own. A kernel
// holds one contraction for a library call; one that adds several (the gradient of an input used as attention's
// query, key and value sums three matrix products) matched none, and ran each product as a generated loop nest
// (with the softmax recomputed inside one of them).
std::vector<Node*> contractions_inside(const PlanningState& state, const LoweredKernel& lowered, const NodePtr& root) {
  std::vector<Node*> found;
  for (const IrStatement& statement : lowered.kernel.body) {
    if (statement.kind != IrStatement::Kind::ReduceLoop || statement.reduce_op != ReduceOp::Add) continue;
    auto origin = lowered.origins.find(statement.name);
    if (origin == lowered.origins.end()) continue;
    Node* sum = origin->second.node;
    if (!sum || sum == root.get() || sum->kind != NodeKind::Reduce || state.materialized.count(sum)) continue;
    LoweringResult alone = lower_group(state.find_node(sum), state.materialized);
    if (!alone.materialize_requests.empty()) continue;
    ContractionMatch match = match_contraction(alone.lowered);
    if (match.contraction && state.backend(*match.contraction)) found.push_back(sum);
  }
  return found;
}

// One root's group lowered, matched against the library, and what it asks to have stored.
RootPlan lower_root(const PlanningState& state, const NodePtr& root) {
  RootPlan plan;
  plan.result = lower_group(root, state.materialized, &state.consumers);
  plan.requests = plan.result.materialize_requests;
  if (!plan.result.materialize_requests.empty() || !state.use_library) return plan;
  plan.match = match_contraction(plan.result.lowered);
  if (!plan.match.materialize.empty()) {
    if (state.backend(*plan.match.contraction)) {
      plan.requests.insert(plan.requests.end(), plan.match.materialize.begin(), plan.match.materialize.end());
      double work = 1;
      for (const auto& [variable, extent] : plan.match.contraction->extents) work *= double(extent);
      for (const OperandStore& store : plan.match.stores)
        plan.operand_stores.push_back(describe_operand_store(store, work));
    }
    plan.match = ContractionMatch();
  } else if (!plan.match.contraction) {
    for (Node* sum : contractions_inside(state, plan.result.lowered, root)) plan.requests.push_back(sum);
  }
  return plan;
}

}  // namespace

void lower_to_fixpoint(PlanningState& state) {
  // A root's lowering is kept while nothing it inlined has been stored since: each round stores a few values,
  // and lowering every root again each round made the first plan of a long recurrence's training step slow
  // (its step kernels inline long chains until the recompute policy cuts them).
  std::unordered_set<Node*> added;  // stored since the previous round
  auto still_valid = [&](const RootPlan& plan) {
    for (Node* node : plan.result.inlined)
      if (added.count(node)) return false;
    return true;
  };
  for (int iteration = 0;; ++iteration) {
    if (iteration > 10000) throw std::logic_error("fusion planning did not converge");
    std::sort(state.roots.begin(), state.roots.end(), [](const NodePtr& a, const NodePtr& b) { return a->id < b->id; });
    std::vector<Node*> requests;
    for (const NodePtr& root : state.roots) {
      if (root->kind == NodeKind::Code || root->kind == NodeKind::HostOperation) {  // never fused: inputs are buffers
        for (const NodePtr& input : root->inputs)
          if (!input->is_computed() && !state.materialized.count(input.get())) requests.push_back(input.get());
        continue;
      }
      auto cached = state.plans.find(root.get());
      if (cached == state.plans.end() || !still_valid(cached->second)) {
        cached = state.plans.insert_or_assign(root.get(), lower_root(state, root)).first;
        std::vector<std::string>& stores = state.operand_stores[root.get()];
        for (const std::string& store : cached->second.operand_stores)
          if (std::find(stores.begin(), stores.end(), store) == stores.end()) stores.push_back(store);
      }
      requests.insert(requests.end(), cached->second.requests.begin(), cached->second.requests.end());
    }
    if (requests.empty()) requests = shared_values_to_store(state.roots, state.materialized);
    if (requests.empty()) break;
    added.clear();
    for (Node* request : requests) {
      if (state.materialized.count(request)) continue;
      state.add_root(state.find_node(request));
      added.insert(request);
    }
  }
}

}  // namespace metajit
