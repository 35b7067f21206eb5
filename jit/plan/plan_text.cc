// A plan as text: see plan_text.h.
#include "jit/plan/plan_text.h"

namespace metajit {
namespace {

std::string value_text(const GraphSignature& signature, int position) {
  const Node& node = *signature.nodes[position];
  return "#" + std::to_string(position) + " " + node.op_name() + " " + dtype_name(node.dtype) + " " +
         shape_to_string(node.shape);
}

std::string positions_text(const std::vector<int>& positions) {
  std::string text;
  for (size_t index = 0; index < positions.size(); ++index)
    text += (index ? ", #" : "#") + std::to_string(positions[index]);
  return text.empty() ? "nothing" : text;
}

}  // namespace

std::string plan_text(const Plan& plan, const GraphSignature& signature) {
  std::string text = "plan: " + std::to_string(plan.kernels.size()) + " kernels over a graph of " +
                     std::to_string(signature.nodes.size()) + " values, targets " + positions_text(signature.targets) +
                     "\n";
  for (size_t index = 0; index < plan.kernels.size(); ++index) {
    const PlannedKernel& kernel = plan.kernels[index];
    std::string kind = kernel.code             ? "code op"
                       : kernel.host_operation ? "host operation"
                       : !kernel.library       ? "generated"
                       : kernel.epilogue       ? "library call + epilogue"
                                               : "library call";
    text += "  kernel " + std::to_string(index) + ": " + kind;
    if (!kernel.key.empty()) text += " " + kernel.key;
    if (!kernel.cuda.source.empty()) text += " (CUDA, " + kernel.cuda.schedule + ")";
    if (!kernel.rendered.source.empty())
      text += ", " + std::to_string(kernel.rendered.work_items) + " work items, grain " +
              std::to_string(kernel.rendered.grain);
    text += "\n";
    if (kernel.library) text += "    call " + kernel.library->describe() + "\n";
    if (!kernel.contraction.empty() && !kernel.library)
      text += "    contraction " + kernel.contraction + " (no library took it)\n";
    text += "    writes " + value_text(signature, plan.outputs[index]) + "\n";
    for (int sibling : plan.siblings[index]) text += "    writes " + value_text(signature, sibling) + "\n";
    text += "    reads " + positions_text(plan.inputs[index]) + "\n";
    for (const std::string& op : kernel.lowered.kernel.fused_ops) text += "    fused " + op + "\n";
    const std::vector<int>& released = plan.lifetimes.last_read_by[index];
    if (!released.empty()) text += "    last reader of " + positions_text(released) + "\n";
  }
  return text;
}

}  // namespace metajit
