// What the planner's passes share while one plan is made: the pending graph behind the targets, the values
// chosen to be stored (each one the root of a kernel) and each root's latest lowering. Passes read and extend
// it; it holds no policy of its own.
#pragma once
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/node.h"
#include "jit/ir/lowering.h"
#include "jit/plan/contraction_matching.h"
#include "jit/plan/planner.h"

namespace metajit {

// A root's latest lowering, with the library match found for it and the values it asked to have stored.
struct RootPlan {
  LoweringResult result;
  ContractionMatch match;
  std::vector<Node*> requests;
  std::vector<std::string> operand_stores;  // requests made so that a library call can read an operand, described
};

struct PlanningState {
  PlanningState(const std::vector<NodePtr>& targets, ContractionBackend backend);

  // Stores `node`: it becomes the root of a kernel of its own (nothing for a computed or stored node).
  void add_root(const NodePtr& node);
  // The NodePtr of a pending node the lowering names by pointer.
  NodePtr find_node(Node* wanted) const;

  std::vector<NodePtr> targets;
  ContractionBackend backend;  // null: every contraction stays a generated kernel
  bool use_library = false;    // a backend, and library lowering enabled
  // Every pending node reachable from the targets, found in one walk (planning never adds nodes), and how many
  // pending nodes read each one (where lowering may cut an oversized kernel).
  std::unordered_map<Node*, NodePtr> pending_nodes;
  ConsumerCounts consumers;
  std::unordered_set<Node*> materialized;  // the stored values: the roots
  std::vector<NodePtr> roots;               // sorted by id (launch order) once lowering settles
  std::unordered_map<Node*, RootPlan> plans;  // per root
  // Per root: the values stored in any round so that its library call can read them (describe_operand_store),
  // for mj.inspect; the kept match of a root that is a library call in the end carries them.
  std::unordered_map<Node*, std::vector<std::string>> operand_stores;
};

// The passes, in the order plan_kernels runs them (jit/plan/planner.cc); one file each.
void collect_pending(PlanningState& state);            // collect_pending.cc
void cut_deep_chains(PlanningState& state);            // cut_deep_chains.cc
void lower_to_fixpoint(PlanningState& state);          // lower_to_fixpoint.cc
void fold_consumers_into_calls(PlanningState& state);  // fold_consumers_into_calls.cc
// Pass 5 is join_sibling_kernels (jit/plan/sibling_kernels.h), over the roots' kernels in launch order.
void start_host_operations_early(std::vector<LoweredKernel>& lowered,
                                 std::vector<ContractionMatch>& matches);  // early_host_operations.cc
std::vector<PlannedKernel> render_kernels(std::vector<LoweredKernel> lowered, std::vector<ContractionMatch> matches,
                                          ContractionBackend backend, bool render_cpu_source);  // render_kernels.cc

}  // namespace metajit
