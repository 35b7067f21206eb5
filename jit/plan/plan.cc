#include "jit/plan/plan.h"

#include <stdexcept>

#include "core/log.h"
#include "core/stats.h"
#include "jit/plan/plan_text.h"

namespace metajit {

std::shared_ptr<const Plan> make_plan(const GraphSignature& signature, std::vector<PlannedKernel> kernels) {
  int64_t pending = 0;
  for (const NodePtr& node : signature.nodes) pending += !node->is_computed();
  stats().planned_nodes += pending;
  stats().plans_made += 1;
  auto plan = std::make_shared<Plan>();
  for (PlannedKernel& kernel : kernels) {
    auto position = [&](const NodePtr& node) {
      int found = signature_position(signature, *node);
      if (found < 0) throw std::logic_error("planned kernel uses a node outside the signature");
      return found;
    };
    plan->outputs.push_back(position(kernel.lowered.output));
    std::vector<int> siblings;
    for (const NodePtr& sibling : kernel.lowered.siblings) siblings.push_back(position(sibling));
    plan->siblings.push_back(std::move(siblings));
    std::vector<int> inputs;
    for (const NodePtr& input : kernel.lowered.inputs) inputs.push_back(position(input));
    plan->inputs.push_back(std::move(inputs));
    kernel.lowered.output = nullptr;
    kernel.lowered.siblings.clear();
    kernel.lowered.inputs.clear();
    kernel.lowered.origins.clear();
    kernel.lowered.scatter_target.clear();
    kernel.lowered.kernel.body.clear();
    kernel.lowered.kernel.row_body.clear();
    plan->kernels.push_back(std::move(kernel));
  }
  plan->lifetimes = buffer_lifetimes(signature, *plan);
  if (log_enabled(LogLevel::Plan)) log_message(LogLevel::Plan, plan_text(*plan, signature));
  return plan;
}

}  // namespace metajit
