// The planner as the list of its passes, each in a file of its own in this folder:
//   1. collect pending       the pending graph behind the targets, and who reads what
//   2. cut deep chains       a value every kMaximumFusedDepth ops along a chain is stored
//   3. lower to a fixpoint   lower every stored value's group; store what the groups ask for, then what the
//                            recompute policy says is cheaper stored, until nothing changes
//   4. fold into calls       a library call's one elementwise reader joins the call as its epilogue
//   5. join siblings         elementwise kernels sharing inputs become one kernel with several outputs
//   5b. start host work early  a collective moves ahead of the kernels it does not need
//   6. render and key        library calls chosen, C++ rendered and keyed for the kernel cache
#include "jit/plan/planner.h"

#include "jit/plan/planning_state.h"
#include "jit/plan/sibling_kernels.h"

namespace metajit {

std::vector<PlannedKernel> plan_kernels(const std::vector<NodePtr>& targets, ContractionBackend backend,
                                        bool render_cpu_source, bool multiple_outputs) {
  PlanningState state(targets, backend);
  collect_pending(state);
  cut_deep_chains(state);
  lower_to_fixpoint(state);
  if (state.use_library) fold_consumers_into_calls(state);
  // The roots' kernels in launch order; a Code op or host operation is an entry of its own whose inputs are buffers.
  std::vector<LoweredKernel> lowered;
  std::vector<ContractionMatch> matches;
  for (const NodePtr& root : state.roots) {
    if (root->kind == NodeKind::Code || root->kind == NodeKind::HostOperation) {
      LoweredKernel code;
      code.output = root;
      code.inputs = root->inputs;
      lowered.push_back(std::move(code));
      matches.emplace_back();
      continue;
    }
    RootPlan& plan = state.plans.at(root.get());
    auto stores = state.operand_stores.find(root.get());
    if (stores != state.operand_stores.end() && plan.match.contraction) plan.match.stored_operands = stores->second;
    lowered.push_back(std::move(plan.result.lowered));
    matches.push_back(std::move(plan.match));
  }
  if (multiple_outputs && sibling_kernels_enabled())
    join_sibling_kernels(lowered, matches, state.materialized, &state.consumers);
  start_host_operations_early(lowered, matches);
  return render_kernels(std::move(lowered), std::move(matches), backend, render_cpu_source);
}

}  // namespace metajit
